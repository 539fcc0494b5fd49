"""The contract of ``--claims-impl``: what the verifiers call exists in ``impl``, and its page is what
``claims contract`` writes from impl's docstrings and the verifiers' ``uses=``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import course_catalogue

import impl
from claims_harness.cli import main as claims_main
from claims_harness.engine import registered

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "implementation-contract.md"
ENTRY = re.compile(r"^### `(\w+)`\n(.*?)(?=^#{2,3} |\Z)", re.M | re.S)


def _used() -> dict[str, set[str]]:
    """impl function -> the verifiers that declare it in uses=."""
    used: dict[str, set[str]] = {}
    for name, verifier in registered().items():
        for function in verifier.uses:
            used.setdefault(function, set()).add(name)
    return used


def test_every_function_a_verifier_uses_is_exported_by_impl():
    missing = {function: sorted(verifiers) for function, verifiers in _used().items() if function not in impl.__all__}
    assert not missing, f"used by verifiers but not in impl.__all__: {missing}"


def test_the_committed_page_is_what_claims_contract_writes(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert claims_main(["contract", "--check"]) == 0, capsys.readouterr().err


def test_the_page_lists_each_function_once_with_impls_signature_and_the_claims_that_call_it():
    documented = {match.group(1): match.group(2) for match in ENTRY.finditer(CONTRACT.read_text(encoding="utf-8"))}
    assert set(documented) == set(_used())
    catalogue = course_catalogue()
    needed: dict[str, set[str]] = {}
    for entry in catalogue.entries:
        for check in entry.claim.checks if entry.claim else ():
            for function in catalogue.verifiers[check.verifier].uses:
                needed.setdefault(function, set()).add(entry.id)
    for function, text in documented.items():
        claims_line = re.search(r"^Claims: (.*)$", text, re.M)
        assert set(re.findall(r"`([\w-]+)`", claims_line.group(1))) == needed[function], function
    assert "`gae_advantages(r_t: ArrayLike, v_t: ArrayLike, v_tp1: ArrayLike, terminated_t: ArrayLike, " \
           "trace_cut_t: ArrayLike, gamma: float, lambda_: float, *, carry: ArrayLike | None = None) -> " \
           "np.ndarray`" in documented["gae_advantages"]


@pytest.fixture
def course_copy(tmp_path: Path) -> Path:
    for name in ("claims", "verifiers", "impl", "docs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "Module_4_Sources.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_an_edited_docstring_makes_the_page_stale_until_it_is_written_again(course_copy):
    """In a fresh process, as an author runs it (this one has imported the project's own impl)."""
    def contract(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "claims_harness.cli", "contract", *arguments], cwd=course_copy,
                              capture_output=True, text=True, timeout=300)

    gae = course_copy / "impl" / "gae.py"
    gae.write_text(gae.read_text(encoding="utf-8").replace("with separate bootstrap and trace masks",
                                                           "with a bootstrap mask and a trace mask", 1),
                   encoding="utf-8")
    stale = contract("--check")
    assert stale.returncode == 1 and "regenerate it with 'claims contract'" in stale.stderr
    assert contract().returncode == 0 and contract("--check").returncode == 0
    page = (course_copy / "docs" / "implementation-contract.md").read_text(encoding="utf-8")
    assert "with a bootstrap mask and a trace mask" in page
    assert page.startswith(CONTRACT.read_text(encoding="utf-8").partition("<!--")[0])
