"""The contract of ``--impl``: what the verifiers call exists in ``impl`` and is documented, with its claims."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import impl
from claims_harness import load_catalogue
from claims_harness.engine import registered

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "implementation-contract.md"
ENTRY = re.compile(r"^### `(\w+)`\n(.*?)(?=^#{2,3} |\Z)", re.M | re.S)
CLAIMS_LINE = re.compile(r"^Claims: (.*)$", re.M)


def _used() -> dict[str, set[str]]:
    """impl function -> the verifiers that declare it in uses=."""
    used: dict[str, set[str]] = {}
    for name, verifier in registered().items():
        for function in verifier.uses:
            used.setdefault(function, set()).add(name)
    return used


def _documented() -> dict[str, str]:
    return {match.group(1): match.group(2) for match in ENTRY.finditer(CONTRACT.read_text(encoding="utf-8"))}


def test_every_function_a_verifier_uses_is_exported_by_impl():
    missing = {function: sorted(verifiers) for function, verifiers in _used().items() if function not in impl.__all__}
    assert not missing, f"used by verifiers but not in impl.__all__: {missing}"


def test_every_function_a_verifier_uses_is_documented_and_nothing_else():
    used, documented = set(_used()), set(_documented())
    assert not used - documented, f"add to {CONTRACT.name}: {sorted(used - documented)}"
    assert not documented - used, f"no verifier uses these any more; remove from {CONTRACT.name}: " \
                                  f"{sorted(documented - used)}"


def test_each_documented_function_lists_the_claims_that_need_it():
    catalogue = load_catalogue(ROOT / "claims")
    needed: dict[str, set[str]] = {}
    for entry in catalogue.entries:
        for check in entry.claim.checks if entry.claim else ():
            verifier = catalogue.verifiers.get(check.verifier)
            for function in verifier.uses if verifier else ():
                needed.setdefault(function, set()).add(entry.id)
    wrong = {}
    for function, text in _documented().items():
        line = CLAIMS_LINE.search(text)
        listed = set(re.findall(r"`([\w-]+)`", line.group(1))) if line else set()
        if listed != needed.get(function, set()):
            wrong[function] = {"listed, not needed": sorted(listed - needed.get(function, set())),
                               "needed, not listed": sorted(needed.get(function, set()) - listed)}
    assert not wrong, f"fix the 'Claims:' lines of {CONTRACT.name}: {wrong}"


@pytest.mark.parametrize("function", sorted(_used()))
def test_documented_signature_is_impl_signature(function):
    """The entry shows impl's signature, so a changed signature shows up here as a stale entry."""
    signature = str(inspect.signature(getattr(impl, function))).replace("'", "")
    assert f"`{function}{signature}`" in _documented().get(function, "").splitlines()
