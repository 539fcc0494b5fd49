"""Running the claims against the bug zoo: one pytest subprocess per variant, read back from claims.json.

Each subprocess is ``python -m pytest claims --claims-impl zoo.<variant> -k <claims> ...`` in the smoke
profile, where a falsifying example is reported as found, without shrinking.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from zoo import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "impl"
# Claims whose verifiers use no function any variant replaces: each variant must leave them passing.
CONTROLS = ("k1-can-be-negative", "discount-weight-examples")


def replaced_functions(variant: str) -> tuple[str, ...]:
    """The names of ``impl.__all__`` that ``zoo.<variant>`` binds to something other than impl's object."""
    reference = importlib.import_module(REFERENCE)
    module = importlib.import_module(f"zoo.{variant}")
    return tuple(name for name in reference.__all__ if getattr(module, name, None) is not getattr(reference, name))


@cache
def _claims_by_function() -> dict[str, tuple[str, ...]]:
    from claims_harness.engine import load_catalogue

    catalogue = load_catalogue(ROOT / "claims")
    users: dict[str, list[str]] = {}
    for entry in catalogue.entries:
        if entry.claim is None:
            continue
        for check in entry.claim.checks:
            verifier = catalogue.verifiers.get(check.verifier)
            for function in verifier.uses if verifier else ():
                users.setdefault(function, [])
                if entry.id not in users[function]:
                    users[function].append(entry.id)
    return {function: tuple(ids) for function, ids in users.items()}


def claims_to_run(variant: str) -> list[str]:
    """Every claim whose verifiers call a function the variant replaces, its ``caught_by``, and the controls."""
    using = [claim for function in replaced_functions(variant) for claim in _claims_by_function().get(function, ())]
    return list(dict.fromkeys([*VARIANTS[variant].caught_by, *using, *CONTROLS]))


def failing_claims(impl: str, claim_ids: Iterable[str]) -> list[str]:
    """Run the claims ``claim_ids`` (smoke profile, seed 0) against ``impl``; the ids that failed or errored.

    Raises:
      RuntimeError: when pytest wrote no report (it could not collect or start).
    """
    selected = " or ".join(claim_ids)
    with tempfile.TemporaryDirectory(prefix="claims-zoo-") as report:
        # Variants already run side by side, one per core: a pool for each one's seeds would only contend.
        command = [sys.executable, "-m", "pytest", "claims", "-q", "-p", "no:cacheprovider",
                   "-p", "no:benchmark", "--claims-impl", impl, "--claims-profile", "smoke", "--claims-seed", "0",
                   "--claims-workers", "1", "--claims-report", report, "-k", selected]
        finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        results_file = Path(report) / "claims.json"
        if not results_file.is_file():
            raise RuntimeError(f"pytest wrote no report for --claims-impl {impl} (exit {finished.returncode}):\n"
                               f"{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}")
        results = json.loads(results_file.read_text(encoding="utf-8"))
    return [row["id"] for row in results["claims"] if row["status"] in ("failed", "error")]


def run_zoo(variants: Iterable[str] | None = None, *, workers: int | None = None) -> dict[str, list[str]]:
    """Run each variant of the zoo against the claims that could catch it; variant -> ids of failed claims.

    Each variant runs in its own pytest subprocess, on the claims of :func:`claims_to_run`.

    Args:
      variants: names of ``zoo.VARIANTS`` (default: all of them, in their order).
      workers: how many subprocesses run at once (default: the number of CPUs).

    Raises:
      KeyError: for a name that is not a variant.
    """
    names = list(VARIANTS if variants is None else variants)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise KeyError(f"no such variant in the zoo: {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    selections = {name: claims_to_run(name) for name in names}
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
        failed = pool.map(lambda name: failing_claims(f"zoo.{name}", selections[name]), names)
        return dict(zip(names, failed, strict=True))

