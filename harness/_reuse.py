"""``claims verify`` without pytest, when no check has to run.

A warm ``claims verify`` used to spend seconds starting pytest and importing what the verifiers
import, only to reuse every observation from the cache. When every check can be answered without
its verifier (a skip, or cached observations compared anew with what the claim now states), the
reports are written from here instead, from the evidence the pytest plugin's items would carry,
made by the same functions: the same reports but for timings. When any check must run, pytest
runs them all, and reuses what it can there.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._loading import Catalogue
from harness._registry import VERIFIER_PACKAGE
from harness._report import check_evidence, claim_payload, file_payload, problems_evidence
from harness._runner import RunOptions, failure_text, reuse_check


@dataclass(frozen=True)
class Reused:
    """Every item's evidence as the report writer reads it, and what pytest would print for the failing ones."""

    evidence: list[dict[str, Any]]
    failures: list[str]


def reuse_every_check(catalogue: Catalogue, options: RunOptions) -> Reused | None:
    """The evidence of every check and every problem of the catalogue, or None when a check has to run."""
    if not _imports_as_pytest_would(options.impl):
        return None
    evidence, failures = [], []
    for file in catalogue.files:
        problems = [str(problem) for problem in catalogue.file_problems.get(file, [])]
        if problems:
            evidence.append(problems_evidence(file_payload(catalogue, file), problems))
            failures.append("\n".join(problems))
        for entry in catalogue.in_file(file):
            payload = claim_payload(entry, catalogue)
            if entry.broken:
                problems = [str(problem) for problem in entry.problems]
                evidence.append(problems_evidence(payload, problems))
                failures.append("\n".join(problems))
                continue
            assert entry.claim is not None
            for index, check in enumerate(entry.claim.checks):
                result = reuse_check(entry, index, catalogue.verifiers[check.verifier], options)
                if result is None:
                    return None
                evidence.append(check_evidence(payload, entry, index, result))
                if result.status in ("failed", "error"):
                    failures.append(failure_text(entry, index, result, options))
    # Nothing to report is pytest's to say (it exits with "no tests collected").
    return Reused([json.loads(text) for text in evidence], failures) if evidence else None


def _imports_as_pytest_would(impl: str) -> bool:
    """Whether this process finds the harness, the verifiers and the implementation where pytest would.

    ``python -m pytest`` puts the working directory first on ``sys.path``, so a package there
    shadows the installed one (a tox environment's copy of the harness, say); a cache key
    computed from the other copy could reuse observations the code pytest runs never made.
    """
    here = Path.cwd()
    for name in ("harness", VERIFIER_PACKAGE, impl.partition(".")[0]):
        local = next((path for path in (here / name / "__init__.py", here / f"{name}.py") if path.is_file()), None)
        spec = importlib.util.find_spec(name)
        found = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if found is None or (local is not None and local.resolve() != found):
            return False
    return True
