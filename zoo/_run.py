"""Running the claims against the bug zoo, through the engine's API (``claims_harness.engine``).

Each variant is judged as ``claims verify --claims-impl zoo.<variant>`` would judge it (smoke profile, seed 0: a
falsifying example is reported as found, without shrinking; each implementation in a process of its own), on
every check of the claims that could catch it, those checks on as many lanes as there are CPUs. Only verdicts are
wanted, so a failing check's functions are not blamed one by one and nothing is cached or reported.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
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


def failing_claims(impl: str, claim_ids: Iterable[str], *, lanes: int | None = None) -> list[str]:
    """Run every check of the claims ``claim_ids`` against ``impl`` (smoke profile, seed 0) on ``lanes`` processes
    (default: the number of CPUs); the ids of the claims of which a check failed, erred or never reported.

    Raises:
      KeyError: for an id that is no claim of the course.
      claims_harness.errors.ImplementationError: ``impl`` cannot be imported, or offers functions it does not define
        without saying so, as ``claims verify`` refuses it.
    """
    from claims_harness.engine import RunOptions, check_implementation, close_hosts, drive, every_part, load_catalogue

    wanted = set(claim_ids)
    catalogue = load_catalogue(ROOT / "claims")
    parts = [part for part in every_part(catalogue) if part.entry is not None and part.entry.id in wanted]
    unknown = sorted(wanted - {part.entry.id for part in parts})
    if unknown:
        raise KeyError(f"no such claim in {ROOT / 'claims'}: {', '.join(unknown)}")
    options = RunOptions(impl=impl, profile="smoke", seed=0, directory=str(ROOT))
    try:
        check_implementation(impl, str(ROOT))
        run = drive(parts, catalogue, options, lanes or os.cpu_count() or 1, {}, lambda line: None)
    finally:
        close_hosts()
    if run.interrupted:
        raise KeyboardInterrupt
    not_passed = [part.entry.id for part in parts
                  if (outcome := run.outcomes[part.key]) is None or outcome.status in ("failed", "error")]
    return list(dict.fromkeys(not_passed))


def run_zoo(variants: Iterable[str] | None = None, *, workers: int | None = None) -> dict[str, list[str]]:
    """Run each variant of the zoo against the claims that could catch it; variant -> ids of failed claims.

    The variants run one after the other, each on the claims of :func:`claims_to_run`, their checks on ``workers``
    lanes.

    Args:
      variants: names of ``zoo.VARIANTS`` (default: all of them, in their order).
      workers: how many checks run at once (default: the number of CPUs).

    Raises:
      KeyError: for a name that is not a variant.
    """
    names = list(VARIANTS if variants is None else variants)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise KeyError(f"no such variant in the zoo: {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    return {name: failing_claims(f"zoo.{name}", claims_to_run(name), lanes=workers) for name in names}
