"""Incremental re-verification: what the cache reuses, what invalidates it, and `claims verify`'s report, which is
pytest's."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import pythonpath
from test_loading import claim, claim_file, claims_dir

from claims_harness import load_catalogue
from claims_harness._running import cache as _cache
from claims_harness.cli import main as claims_main
from claims_harness.engine import (
    MARKDOWN_FILE,
    RESULTS_FILE,
    RunOptions,
    encode,
    evaluate,
    every_part,
    reuse_check,
    run_check,
)

CACHE_DIR = Path(".claims-cache")  # the course's cache, as [tool.claims] names it, from the course root

MONTECARLO = """\
  - id: bernoulli-sampled
    where: "4.2.5"
    statement: Sampled groups agree with the exact expectations.
    sources: [williams1992]
    checks:
      - kind: montecarlo
        verifier: bernoulli.group_estimators_montecarlo
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}
        alpha: 1e-6
        beta: 1e-3
        deviation: 0.05
        expect:
          no_baseline: 0.273
          leave_one_out: 0.273
"""
UNKNOWN_SOURCE = claim("cites-nothing-known").replace("[williams1992]", "[nobody2000]")


def _project(root: Path, gradient: str = "0.273", params: str = "p: 0.35") -> Path:
    text = claim_file(claim("bernoulli-gradient", expect=f"gradient: {gradient}"), MONTECARLO, UNKNOWN_SOURCE)
    root.mkdir(exist_ok=True)
    return claims_dir(root, {"a.yaml": text.replace("p: 0.35", params)})


def _run_every_check(claims: Path) -> None:
    """Run every usable check once, in this process, storing observations where `claims verify` looks for them."""
    catalogue = load_catalogue(claims)
    options = RunOptions(profile="smoke", cache_dir=str(CACHE_DIR), report_dir="reports")
    for entry in catalogue.entries:
        for index, check in enumerate(entry.claim.checks if not entry.broken else []):
            run_check(entry, index, catalogue.verifiers[check.verifier], options)


def _without_timings(value):
    if isinstance(value, dict):
        return {key: _without_timings(item) for key, item in value.items() if key not in ("seconds", "started", "id")}
    return [_without_timings(item) for item in value] if isinstance(value, list) else value


def _reports(directory: Path) -> tuple[dict, str]:
    results = json.loads((directory / RESULTS_FILE).read_text(encoding="utf-8"))
    markdown = re.sub(r"started \S+; [\d.]+ s|seed (\d+), [\d.]+ s", r"\1", (directory / MARKDOWN_FILE).read_text())
    return _without_timings(results), markdown


def _without_reuse(report: tuple[dict, str]) -> tuple[dict, str]:
    results, markdown = report
    for row in results["claims"]:
        for check in row["checks"]:
            check.pop("reused")
    return results, markdown.replace(" (observations reused from the cache)", "")


def test_a_report_from_the_cache_equals_the_one_its_checks_give_on_two_lanes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run_every_check(_project(tmp_path))

    # The unknown source is an error.
    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "warm"]) == 1
    assert "ran 0 checks" in capsys.readouterr().out
    lanes = ["--claims-report", "lanes", "--no-cache", "-n", "2"]
    assert claims_main(["verify", "--claims-profile", "smoke", *lanes]) == 1
    assert "ran 2 checks" in capsys.readouterr().out

    warm, lanes = _reports(tmp_path / "warm"), _reports(tmp_path / "lanes")
    checks = [check for row in warm[0]["claims"] for check in row["checks"]]
    assert [check["reused"] for check in checks] == [True, True]
    assert "(observations reused from the cache)" in warm[1]
    assert _without_reuse(warm) == _without_reuse(lanes)
    assert [row["status"] for row in warm[0]["claims"]] == ["passed", "passed", "error"]


def test_claims_verify_and_pytest_write_the_same_report(tmp_path, monkeypatch, capsys):
    """`claims verify` starts no pytest; `pytest claims/`, the way to pytest's own options, writes the same report."""
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "here"]) == 1
    assert "ran 2 checks" in capsys.readouterr().out
    finished = subprocess.run([sys.executable, "-m", "pytest", "claims", "-q", "-p", "no:cacheprovider",
                               "--claims-profile", "smoke", "--claims-report", "pytest"],
                              cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": pythonpath()})
    assert finished.returncode == 1, finished.stdout[-2000:] + finished.stderr[-2000:]

    here, pytest_run = _reports(tmp_path / "here"), _reports(tmp_path / "pytest")
    assert here == pytest_run
    assert [check["reused"] for row in here[0]["claims"] for check in row["checks"]] == [False, False]


def test_a_student_package_in_the_working_directory_is_reused_without_pytest(tmp_path, monkeypatch, capsys):
    """A copy of the reference beside the claims, as a student makes one, is found where pytest would find it."""
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    shutil.copytree(Path(__file__).resolve().parents[1] / "impl", tmp_path / "student_copy")
    assert "student_copy" not in sys.modules and str(tmp_path) not in sys.path

    # The unknown source is an error.
    assert claims_main(["verify", "--claims-impl", "student_copy", "--claims-report", "first"]) == 1
    assert "ran 2 checks" in capsys.readouterr().out
    assert claims_main(["verify", "--claims-impl", "student_copy", "--claims-report", "again"]) == 1
    out = capsys.readouterr().out
    assert "ran 0 checks" in out
    checks = [check for row in json.loads((tmp_path / "again" / RESULTS_FILE).read_text(encoding="utf-8"))["claims"]
              for check in row["checks"]]
    assert [check["reused"] for check in checks] == [True, True]


def test_checks_waiting_for_stubs_are_cached_like_any_other(tmp_path, monkeypatch, capsys):
    """A student's exercises start as stubs: a second run with no edit runs none of the checks waiting for them."""
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    assert claims_main(["exercises", "stubs"]) == 0
    verify = ["verify", "--claims-impl", "stubs", "--claims-report", "mine", "--claims-partial"]
    assert claims_main(verify) == 1  # the unknown source is an error
    assert "ran 2 checks; 1 of 3 results failed, 2 skipped" in capsys.readouterr().out
    assert claims_main(verify) == 1
    assert "ran 0 checks; 1 of 3 results failed, 2 skipped" in capsys.readouterr().out
    checks = [check for row in json.loads((tmp_path / "mine" / RESULTS_FILE).read_text(encoding="utf-8"))["claims"]
              for check in row["checks"]]
    assert [(check["reused"], bool(check["not_implemented"])) for check in checks] == [(True, True), (True, True)]


def test_an_edited_expected_number_is_compared_anew_without_running_the_check(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run_every_check(_project(tmp_path))
    (tmp_path / "claims" / "a.yaml").write_text(claim_file(claim("bernoulli-gradient", expect="gradient: 0.274")),
                                                encoding="utf-8")
    capsys.readouterr()

    assert claims_main(["verify", "--claims-profile", "smoke"]) == 1
    out = capsys.readouterr().out
    assert "ran 0 checks" in out
    assert "FAILED gradient: expected 0.274" in out
    (row,) = json.loads((tmp_path / "reports" / RESULTS_FILE).read_text(encoding="utf-8"))["claims"]
    assert (row["status"], row["checks"][0]["reused"]) == ("failed", True)


@pytest.fixture
def cached(tmp_path):
    """A catalogue whose checks have all run once, storing their observations, and the options that ran them."""
    options = RunOptions(profile="smoke", cache_dir=str(tmp_path / "cache"), report_dir=str(tmp_path / "reports"))
    catalogue = load_catalogue(_project(tmp_path / "first"))
    for entry in catalogue.entries[:2]:
        run_check(entry, 0, catalogue.verifiers[entry.claim.checks[0].verifier], options)
    return catalogue, options


def _reusable(claims: Path, options: RunOptions) -> list[bool]:
    catalogue = load_catalogue(claims)
    return [reuse_check(entry, 0, catalogue.verifiers[entry.claim.checks[0].verifier], options) is not None
            for entry in catalogue.entries[:2]]


def reuse_every_check(catalogue, options):
    """Every part's outcome as the warm path of ``claims verify`` computes it, or None when a check must run."""
    outcomes = [evaluate(part, catalogue, options, reuse_only=True) for part in every_part(catalogue)]
    return None if any(outcome is None for outcome in outcomes) else outcomes


def test_reused_until_params_profile_or_seed_change(cached, tmp_path):
    catalogue, options = cached
    assert _reusable(catalogue.claims_dir, options) == [True, True]
    assert _reusable(_project(tmp_path / "edited", gradient="0.2730"), options) == [True, True]
    assert _reusable(_project(tmp_path / "params", params="p: 0.36"), options) == [False, False]
    for changed in ({"profile": "full"}, {"seed": 1}, {"impl": "zoo.group_mean_as_loo"}):
        assert _reusable(catalogue.claims_dir, dataclasses.replace(options, **changed)) == [False, False]


def test_every_check_reused_and_every_problem_reported_without_running_anything(cached):
    catalogue, options = cached
    reused = reuse_every_check(catalogue, options)
    evidence = [outcome.evidence for outcome in reused]
    assert [item["claim"]["id"] for item in evidence] == ["bernoulli-gradient", "bernoulli-sampled",
                                                          "cites-nothing-known"]
    assert [item["check"]["reused"] for item in evidence[:2]] == [True, True]
    (failure,) = [outcome.message for outcome in reused if outcome.status in ("failed", "error")]
    assert "unknown source 'nobody2000'" in failure


@pytest.mark.parametrize("edited", ["verifiers.bernoulli", "impl", "harness"])
def test_an_edited_verifier_implementation_or_harness_invalidates(cached, monkeypatch, edited):
    catalogue, options = cached
    digest, whole = _cache.code_digest, _cache.package_digest
    monkeypatch.setattr(_cache, "code_digest",
                        lambda name, roots: "edited" if name == edited else digest(name, roots))
    monkeypatch.setattr(_cache, "package_digest", lambda name: "edited" if name == edited else whole(name))
    assert _reusable(catalogue.claims_dir, options) == [False, False]


def test_a_new_library_version_invalidates(cached, monkeypatch):
    catalogue, options = cached
    monkeypatch.setattr(_cache, "library_versions", lambda: {"numpy": "99"})
    assert _reusable(catalogue.claims_dir, options) == [False, False]


def _package(root: Path, files: dict[str, str]) -> None:
    (root / "digested").mkdir(exist_ok=True)
    for name, text in {"__init__.py": "", **files}.items():
        (root / "digested" / name).write_text(text, encoding="utf-8")
    _cache.forget_sources()


_DIGESTED = {
    "__init__.py": "from .api import advantage, value\n",
    "api.py": ('"""The two contract functions."""\nfrom digested._helper import centred\nimport numpy as np\n\n'
               'SCALE = 2.0\n\n\ndef advantage(x):\n    """Centred and scaled."""\n    return SCALE * centred(x)\n\n\n'
               'def value(x):\n    return np.mean(x)\n'),
    "_helper.py": "def centred(x):\n    return x - _mean(x)\n\n\ndef _mean(x):\n    return sum(x) / len(x)\n",
    "unrelated.py": "Y = 1\n",
}


def _edited(tmp_path, monkeypatch, file: str, old: str, new: str) -> tuple[bool, ...]:
    """Whether one edit (``old`` replaced by ``new`` in ``file``, or ``new`` appended) changes the digest
    of ``advantage`` and of ``value``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(tmp_path, _DIGESTED)
    before = [_cache.code_digest("digested", (name,)) for name in ("advantage", "value")]
    text = _DIGESTED.get(file, "")
    assert old in text
    _package(tmp_path, {**_DIGESTED, file: text.replace(old, new) if old else text + "\n" + new})
    after = [_cache.code_digest("digested", (name,)) for name in ("advantage", "value")]
    assert "digested" not in sys.modules  # nothing was imported
    _package(tmp_path, _DIGESTED)
    return tuple(b != a for b, a in zip(before, after, strict=True))


@pytest.mark.parametrize(("file", "old", "new"), [
    ("_helper.py", "sum(x) / len(x)", "sum(x) / (len(x) - 1)"),  # a helper two calls deep
    ("api.py", "SCALE = 2.0", "SCALE = 3.0"),  # a module-level constant
    ("api.py", "import numpy as np\n", "import numpy as np\nimport math as np\n"),  # an import rebinding a name
])
def test_an_edit_that_advantage_can_reach_reruns_its_checks_and_not_the_others(tmp_path, monkeypatch, file, old, new):
    assert _edited(tmp_path, monkeypatch, file, old, new) == (True, "np" in old)


@pytest.mark.parametrize(("file", "old", "new"), [
    # A module that rebinds a function of another at import: it runs whatever is called.
    ("rebinding.py", "", "import digested._helper as helper\nhelper._mean = lambda x: 0\n"),
    ("_helper.py", "def centred", "print('imported')\n\n\ndef centred"),  # any other import-time statement
    ("api.py", "", "def __getattr__(name):\n    return None\n"),  # a module that answers any name
])
def test_what_runs_at_import_reruns_every_check(tmp_path, monkeypatch, file, old, new):
    assert _edited(tmp_path, monkeypatch, file, old, new) == (True, True)


@pytest.mark.parametrize(("file", "old", "new"), [
    ("unrelated.py", "Y = 1", "Y = 2"),
    ("api.py", '"""Centred and scaled."""', '"""Centred, then scaled."""'),  # advantage's docstring is code
    ("api.py", '"""The two contract functions."""', '"""The contract."""'),  # a module docstring is not
    ("api.py", "", "if __name__ == '__main__':\n    print(advantage([1.0]))\n"),
])
def test_an_edit_no_check_can_reach_reruns_nothing(tmp_path, monkeypatch, file, old, new):
    changed = _edited(tmp_path, monkeypatch, file, old, new)
    assert changed == ((True, False) if "Centred" in old else (False, False))



def test_a_process_that_imported_another_copy_of_the_verifiers_judges_with_the_courses_own(tmp_path, monkeypatch,
                                                                                          capsys):
    """The verifiers are the judge's own code: a course with a copy of its own, run from a process that imported
    another copy (this project's), is judged with its own, and the process keeps the copy it had."""
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    import verifiers
    from verifiers import bernoulli

    shutil.copytree(Path(verifiers.__file__).parent, tmp_path / "verifiers")
    source = tmp_path / "verifiers" / "bernoulli.py"
    # The course's copy observes a wrong gradient: only its own copy can make the check fail.
    text = source.read_text(encoding="utf-8")
    assert text.count('"gradient": gradient,') == 1
    source.write_text(text.replace('"gradient": gradient,', '"gradient": 2 * gradient,'), encoding="utf-8")
    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "own", "-k", "gradient"]) == 1
    assert sys.modules["verifiers"] is verifiers and sys.modules["verifiers.bernoulli"] is bernoulli
    row = json.loads((tmp_path / "own" / RESULTS_FILE).read_text(encoding="utf-8"))["claims"][0]
    assert (row["id"], row["status"]) == ("bernoulli-gradient", "failed")


@pytest.mark.parametrize(("spelling", "warned"), [
    (["--claims-impl", "no_such_student_module", "--claims-report", "mine"], []),
    (["--impl", "no_such_student_module", "--out", "mine"], ["--impl", "--out"]),  # the old spellings: a warning each
    (["--impl=no_such_student_module", "--claims-report", "mine"], ["--impl"]),
])
def test_claims_verify_speaks_the_plugins_vocabulary(tmp_path, monkeypatch, capsys, spelling, warned):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    assert claims_main(["verify", *spelling]) == 2
    error = capsys.readouterr().err
    assert "no_such_student_module" in error and "no report written" in error
    assert not (tmp_path / "mine").exists()
    assert re.findall(r"warning: (\S+) is the old spelling", error) == warned


def test_a_kept_summary_stands_for_its_file_while_the_file_is_unchanged(tmp_path, monkeypatch):
    source = tmp_path / "module.py"
    source.write_text("import json\n\ndef f(x):\n    return helper(x)\n", encoding="utf-8")
    monkeypatch.setattr(_cache, "_kept_summaries", [])
    _cache.keep_summaries_in(tmp_path / "cache")
    _cache.forget_sources()
    parsed = _cache._summary(source)

    def no_parse(*args):
        raise AssertionError("parsed again")

    monkeypatch.setattr(_cache, "_syntax_tree", no_parse)
    _cache.forget_sources()
    assert _cache._summary(source) == parsed  # read back from the cache, not parsed
    source.write_text("def f(x):\n    return x\n", encoding="utf-8")
    _cache.forget_sources()
    with pytest.raises(AssertionError, match="parsed again"):
        _cache._summary(source)  # an edited file is parsed anew
    _cache.forget_sources()


def test_a_cache_entry_the_harness_did_not_write_is_ignored_and_the_run_says_so(tmp_path):
    cache = _cache.ObservationCache(tmp_path / "cache")
    cache.store("key", {"holds": True, "value": np.float64(0.5)}, tmp_path / "figures")
    assert cache.load("key", tmp_path / "figures") == {"holds": True, "value": 0.5}
    (entry,) = [path for path in (tmp_path / "cache").iterdir() if path.name != "secret"]
    # What an implementation could write under a key it computed: observations of its choosing, unsigned.
    entry.write_bytes(encode(({"holds": True, "value": 1.0}, {})))
    with pytest.warns(UserWarning, match="did not write"):
        assert cache.load("key", tmp_path / "figures") is None
    # Signed with another project's secret: the same.
    other = _cache.ObservationCache(tmp_path / "other")
    other.store("key", {"holds": False}, tmp_path / "figures")
    shutil.copy(tmp_path / "other" / entry.name, entry)
    with pytest.warns(UserWarning, match="did not write"):
        assert cache.load("key", tmp_path / "figures") is None


class _Executes:
    def __reduce__(self):
        return (print, ("ran code while the judge read the cache",))


def test_nothing_but_data_is_read_back_from_a_worker_or_the_cache(tmp_path, capsys):
    """A pickle is never read: a worker's answer and a cache entry are messages of data
    (claims_harness._running.wire)."""
    from claims_harness import ClaimsError
    from claims_harness.engine import decode, run_isolated
    from claims_harness.errors import NotData

    value = {"array": np.arange(3.0), "exact": Fraction(1, 3), "flag": np.bool_(True), "items": (1, [2.5, "x"])}
    back = decode(encode(value))
    assert back["exact"] == Fraction(1, 3) and back["array"].tolist() == [0.0, 1.0, 2.0]
    assert back["items"] == (1, [2.5, "x"]) and back["flag"] is np.True_
    with pytest.raises(NotData):
        decode(pickle.dumps(_Executes()))
    with pytest.raises(NotData):
        encode(_Executes())
    with pytest.raises(ClaimsError, match="cannot be sent back from its worker"):
        run_isolated(lambda: {"observed": _Executes()}, 10.0, "a check")
    cache = _cache.ObservationCache(tmp_path / "cache")
    cache.store("key", {"holds": True}, tmp_path / "figures")
    (entry,) = [path for path in (tmp_path / "cache").iterdir() if path.name != "secret"]
    content = pickle.dumps(({"holds": _Executes()}, {}))
    entry.write_bytes(cache._sign("key", content) + content)  # a pickle, even under the project's own signature
    assert cache.load("key", tmp_path / "figures") is None
    assert "ran code" not in capsys.readouterr().out


