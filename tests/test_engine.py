"""The engine's guarantees: one driver, checks in ``runtest``, whole reports or none, this run's only.

Each test is one way the engine used to lose, fake or hide a result (issue 14): a report half
written on a full disk, an interrupted run that looked green, an old report announced as new, a
row lost to a name clash, a partial run rewriting the registry, stale cache entries, a command
run from the wrong directory.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from claims_harness._reporting import report as _report
from claims_harness._reporting.results import _revision
from claims_harness._running import driver
from claims_harness.cli import main as claims_main
from claims_harness.engine import ObservationCache, code_digest, forget_sources

PROJECT = Path(__file__).resolve().parents[1]
MODELINE = "# yaml-language-server: $schema=schema.json\n"
PLUGINS_OFF = ("-p", "no:randomly", "-p", "no:benchmark")


def claim(claim_id: str, gradient: str = "0.273", where: str = "4.2.5") -> str:
    return f"""\
  - id: {claim_id}
    where: "{where}"
    statement: The one-step Bernoulli policy's logit gradient is 0.273.
    sources: [ahmadian2024]
    covers: [engine-gradient]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {{p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}}
        expect:
          gradient: {gradient}
          group_mean_ratio: {{exact: "7/8"}}
"""


def claim_file(*claims: str) -> str:
    return MODELINE + 'title: "Engine"\nsteps: ["4.2.4", "4.2.5"]\n' + LEDGER + "claims:\n" + "".join(claims)


LEDGER = """\
statements:
  - id: engine-gradient
    where: "4.2.5"
    says: The one-step Bernoulli policy's logit gradient is 0.273.
    shape: instance
    scope: {}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copy(PROJECT / "Module_4_Sources.md", pytester.path)
    (pytester.path / "claims").mkdir()
    return pytester


def write(project: pytest.Pytester, text: str, name: str = "engine.yaml") -> None:
    (project.path / "claims" / name).write_text(text, encoding="utf-8")


def results(directory: Path) -> dict:
    return json.loads((directory / "claims.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- one driver, checks in runtest


def test_setup_only_runs_no_check(project):
    write(project, claim_file(claim("would-fail", gradient="0.5")))
    result = project.runpytest_inprocess("claims", *PLUGINS_OFF, "--setup-only")
    assert "FAILED" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK


def test_the_duration_of_a_check_is_its_call(project):
    write(project, claim_file(claim("timed")))
    result = project.runpytest_inprocess("claims", *PLUGINS_OFF)
    reports = result.reprec.getreports("pytest_runtest_logreport")
    setup, call = ([r for r in reports if r.when == when][0] for when in ("setup", "call"))
    assert call.duration > setup.duration


def test_ids_that_look_like_disambiguated_names_keep_their_rows(project):
    """Two claims 'same' and a broken claim whose id is what the second would be renamed to: three rows."""
    # Each claim is 12 lines from line 10: the second 'same' is at line 22, so it is named 'same@22'.
    write(project, claim_file(claim("same"), claim("same"), claim("same@22")))
    result = project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    found = results(project.path / "out")
    assert len(found["claims"]) == 3, [row["id"] for row in found["claims"]]
    nodeids = {r.nodeid for r in result.reprec.getreports("pytest_runtest_logreport")}
    assert len(nodeids) == 3, nodeids


def test_only_the_course_claims_directory_is_collected(project):
    write(project, claim_file(claim("real")))
    (project.path / "fixtures" / "claims").mkdir(parents=True)
    (project.path / "fixtures" / "claims" / "stray.yaml").write_text(claim_file(claim("stray")), encoding="utf-8")
    result = project.runpytest_inprocess(".", *PLUGINS_OFF, "--collect-only", "-q")
    out = result.stdout.str()
    assert "claims/engine.yaml::real::exact" in out
    assert "stray" not in out


def test_the_plugin_options_are_namespaced(pytestconfig):
    options = {opt for group in pytestconfig._parser._groups if group.name == "claims"
               for option in group.options for opt in option.names()}
    assert options and all(name.startswith("--claims-") for name in options), options


# --------------------------------------------------------------------------- whole reports, labelled


def test_a_run_stopped_by_x_is_labelled_incomplete_and_keeps_every_selected_row(project):
    write(project, claim_file(claim("fails-first", gradient="0.5"), claim("never-ran")))
    project.runpytest_inprocess("claims", *PLUGINS_OFF, "-x", "--claims-report", "out")
    found = results(project.path / "out")
    assert found["run"]["complete"] is False and "stopped early" in found["run"]["incomplete"]
    statuses = {row["id"]: row["status"] for row in found["claims"]}
    assert statuses == {"fails-first": "failed", "never-ran": "error"}
    never = [row for row in found["claims"] if row["id"] == "never-ran"][0]
    assert "stopped early" in never["checks"][0]["error"]


INTERRUPTS = """
    import os
    import signal
    import time

    import claims_harness

    # Ctrl-C as in a terminal: the process that started this pytest (an xdist worker, say) may have left SIGINT
    # ignored or blocked, and both are inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    @claims_harness.verifier("engine.interrupts", kind="exact")
    def interrupts(ctx):
        os.kill(os.getppid(), signal.SIGINT)  # the worker's parent is pytest: as a Ctrl-C in its terminal
        time.sleep(30)
        return {"value": 1}
"""


def test_an_interrupted_run_is_labelled_in_every_format(project):
    project.makeconftest(INTERRUPTS)
    interrupted = """\
  - id: interrupted
    where: "4.2.5"
    statement: A claim whose check is interrupted by a Ctrl-C.
    sources: [ahmadian2024]
    covers: [engine-gradient]
    checks:
      - kind: exact
        verifier: engine.interrupts
        expect:
          value: 1
"""
    write(project, claim_file(claim("before"), interrupted, claim("after")))
    result = project.runpytest_subprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = project.path / "out"
    found = results(out)
    assert found["run"]["complete"] is False and "interrupted" in found["run"]["incomplete"]
    assert {row["id"] for row in found["claims"]} == {"before", "interrupted", "after"}
    assert "incomplete" in (out / "claims_report.md").read_text(encoding="utf-8").lower()
    assert "incomplete" in (out / "claims_report.html").read_text(encoding="utf-8").lower()


def test_a_full_disk_leaves_the_previous_report_whole(project, monkeypatch):
    write(project, claim_file(claim("ok")))
    project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    out = project.path / "out"
    before = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    real_write = Path.write_text

    def full_disk(self, text, *args, **kwargs):
        if self.name == _report.MARKDOWN_FILE:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    write(project, claim_file(claim("ok"), claim("new-claim")))
    result = project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    monkeypatch.undo()
    after = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    assert after == before
    assert not [path for path in project.path.iterdir() if ".staging-" in path.name]
    # The run fails, and says where this run's results are kept instead of losing them.
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    (kept,) = re.findall(r"this run's results are in (\S+\.json)", result.stdout.str())
    assert {row["id"] for row in json.loads(Path(kept).read_text(encoding="utf-8"))["claims"]} == {"ok", "new-claim"}
    Path(kept).unlink()


def test_the_report_directory_is_replaced_in_one_step_and_keeps_what_the_run_does_not_write(project, tmp_path):
    write(project, claim_file(claim("ok")))
    project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    out = project.path / "out"
    (out / "mutants.json").write_text("{}\n", encoding="utf-8")  # another command's file, and the author's
    (out / "notes").mkdir()
    (out / "notes" / "why.md").write_text("kept\n", encoding="utf-8")
    replaced = out.stat().st_ino
    write(project, claim_file(claim("ok"), claim("new-claim")))
    project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    assert {row["id"] for row in results(out)["claims"]} == {"ok", "new-claim"}
    assert (out / "mutants.json").read_text(encoding="utf-8") == "{}\n"
    assert (out / "notes" / "why.md").read_text(encoding="utf-8") == "kept\n"
    assert not [path for path in project.path.iterdir() if ".staging-" in path.name]
    (first, second) = (tmp_path / "first", tmp_path / "second")
    first.mkdir()
    second.mkdir()
    if _report._exchange(first, second):  # where the system can, the directory itself was swapped in
        assert out.stat().st_ino != replaced


# --------------------------------------------------------------------------- claims verify


def test_verify_survives_an_implementation_that_exits_on_import(project, monkeypatch, capsys):
    monkeypatch.chdir(project.path)
    write(project, claim_file(claim("ok")))
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures"))
    assert claims_main(["verify", "--no-cache", "--claims-impl", "faults.exits_on_import"]) == 2
    err = capsys.readouterr().err
    assert "exit status 1" in err and "no report written" in err
    assert not (project.path / "reports").exists()


def test_a_partial_run_leaves_the_registry_alone(project, monkeypatch):
    monkeypatch.chdir(project.path)
    write(project, claim_file(claim("first"), claim("second")))
    assert claims_main(["verify", "--no-cache"]) == 0
    sources = (project.path / "Module_4_Sources.md").read_text(encoding="utf-8")
    assert "`second`" in sources
    write(project, claim_file(claim("first"), claim("second"), claim("third")))
    claims_main(["verify", "--no-cache", "-k", "first"])
    assert (project.path / "Module_4_Sources.md").read_text(encoding="utf-8") == sources
    assert results(project.path / "reports")["run"]["selection"] != "all"


@pytest.mark.parametrize(("expression", "ids"), [
    ("first", ["first"]),
    ("first or third", ["first", "third"]),
    ("not (first or third)", ["second"]),
    ("FIRST and exact", ["first"]),  # any case; a word matches the check's kind too
    ("first and experiment", None),
    ("first or", "a word missing at the end"),
    ("(first", "a '(' that is not closed"),
    ("first third", "'third' where the expression should end"),
])
def test_claims_verify_selects_checks_as_pytests_k_does(project, monkeypatch, capsys, expression, ids):
    monkeypatch.chdir(project.path)
    write(project, claim_file(claim("first"), claim("second"), claim("third")))
    status = claims_main(["verify", "--no-cache", "--claims-report", "picked", "-k", expression])
    if isinstance(ids, list):
        assert [row["id"] for row in results(project.path / "picked")["claims"]] == ids
        assert results(project.path / "picked")["run"]["selection"] == f"{len(ids)} of 3 checks selected"
        return
    assert status == 2
    error = capsys.readouterr().err
    assert ("matches no check of the 3" if ids is None else ids) in error and "-k" in error
    assert not (project.path / "picked").exists()


def test_a_lane_that_dies_costs_only_the_part_it_was_running(project, monkeypatch):
    """The driver's lanes are forked processes: one that dies (here, in the middle of the second claim's check) costs
    that part an error row saying so; the others are evaluated, by the lane that took its place too."""
    from claims_harness import load_catalogue
    from claims_harness.engine import RunOptions, every_part

    monkeypatch.chdir(project.path)
    write(project, claim_file(claim("first"), claim("second"), claim("third"), claim("fourth")))
    catalogue = load_catalogue(project.path / "claims")
    real = driver.evaluate

    def evaluate(part, catalogue, options, *, reuse_only=False):
        if not reuse_only and part.entry.id == "second":
            os._exit(3)
        return real(part, catalogue, options, reuse_only=reuse_only)

    monkeypatch.setattr(driver, "evaluate", evaluate)
    said: list[str] = []
    run = driver.drive(every_part(catalogue), catalogue, RunOptions(profile="smoke", cache_dir=None), 2, {},
                       said.append)
    statuses = {key.split("::")[1]: outcome.status for key, outcome in run.outcomes.items()}
    assert statuses == {"first": "passed", "second": "error", "third": "passed", "fourth": "passed"}, said
    (died,) = [outcome.message for key, outcome in run.outcomes.items() if "second" in key]
    assert "the process running it died (exit status 3)" in died
    assert len(said) == 4 and not run.interrupted


def test_claims_audit_runs_both_series_of_the_selected_checks_on_the_drivers_lanes(monkeypatch):
    """The audit's runs go through the run driver: both series of each selected Monte Carlo check, on two lanes,
    the null series at the (here tiny) alpha asked for, the shifted one detecting the stated deviation."""
    from claims_harness import load_catalogue
    from claims_harness.engine import audit, reference_implementation

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    rows = audit(load_catalogue(root / "claims"), 2, 1e-6, reference_implementation(),
                 "score-function-estimator-unbiased and montecarlo", lanes=2)
    (row,) = rows
    assert row.node.endswith("::score-function-estimator-unbiased::montecarlo") and row.runs == 2
    assert (row.errors, row.false_failures) == (0, 0) and row.detections >= 1, row


def test_claims_verify_with_no_claim_files_says_so_and_writes_nothing(project, monkeypatch, capsys):
    monkeypatch.chdir(project.path)
    assert claims_main(["verify", "--no-cache"]) == 2
    assert "no claim files, so nothing to verify" in capsys.readouterr().err
    assert not (project.path / "reports").exists()


def test_claims_verify_refuses_pytest_arguments_and_names_what_to_use(project, monkeypatch, capsys):
    monkeypatch.chdir(project.path)
    write(project, claim_file(claim("first")))
    assert claims_main(["verify", "--", "-x"]) == 2
    error = capsys.readouterr().err
    assert "(given: -x)" in error and "-k EXPRESSION" in error and "pytest claims/" in error


def test_verify_from_a_subdirectory_writes_into_the_course(project, monkeypatch):
    write(project, claim_file(claim("ok")))
    monkeypatch.chdir(project.path / "claims")
    assert claims_main(["verify", "--no-cache"]) == 0
    assert (project.path / "reports" / "claims.json").is_file()
    assert not (project.path / "claims" / "reports").exists()
    assert not (project.path / "claims" / ".claims-cache").exists()


@pytest.mark.parametrize("command", [["verify"], ["list"], ["lint"], ["audit"]])
def test_outside_any_course_every_command_refuses_in_one_line(tmp_path, monkeypatch, capsys, command):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (tmp_path / "pyproject.toml").unlink()
    assert claims_main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not inside a course" in err, err
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("command", [["verify"], ["list"], ["lint"], ["audit"]])
def test_a_claims_dir_that_does_not_exist_is_one_line(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    assert claims_main(["--claims-dir", str(tmp_path / "nowhere"), *command]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err, err


# --------------------------------------------------------------------------- the cache


def test_a_student_module_is_keyed_on_the_package_it_imports(tmp_path, monkeypatch):
    (tmp_path / "reference_pkg").mkdir()
    (tmp_path / "reference_pkg" / "__init__.py").write_text("from .core import add\n", encoding="utf-8")
    (tmp_path / "reference_pkg" / "core.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    (tmp_path / "student_module.py").write_text("from reference_pkg import *\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_sources()
    first = code_digest("student_module", ("add",))
    (tmp_path / "reference_pkg" / "core.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    forget_sources()
    assert code_digest("student_module", ("add",)) != first
    forget_sources()


def test_concurrent_stores_of_one_key_never_collide(tmp_path):
    cache = ObservationCache(tmp_path / "cache")
    errors: list[BaseException] = []

    def store(n: int) -> None:
        try:
            for i in range(300):
                cache.store("samekey", {"value": n * 1000 + i}, tmp_path / "figures")
        except BaseException as error:  # noqa: BLE001 (collected for the assertion)
            errors.append(error)

    threads = [threading.Thread(target=store, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cache.load("samekey", tmp_path / "figures") is not None
    assert [path.name for path in (tmp_path / "cache").iterdir() if path.name != "secret"] == ["samekey.entry"]


# --------------------------------------------------------------------------- the engine's shape


def test_loading_claims_imports_no_rendering(tmp_path):
    """Validation does not depend on rendering: jinja2, latex2mathml and the HTML code stay unimported."""
    import subprocess

    code = ("import sys; from claims_harness._claims.loading import load_catalogue; load_catalogue(); "
            "print(sorted(m for m in ('jinja2', 'latex2mathml', 'claims_harness._reporting.html') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_an_entry_pytest_would_pass_over_still_has_its_row(project):
    """A directory and a dangling symlink named ``*.yaml``: pytest collects no file there, the engine a row each."""
    write(project, claim_file(claim("ok")))
    (project.path / "claims" / "folder.yaml").mkdir()
    (project.path / "claims" / "dangling.yaml").symlink_to(project.path / "nowhere.yaml")
    project.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    rows = {row["file"]: row["status"] for row in results(project.path / "out")["claims"]}
    assert rows == {"claims/engine.yaml": "passed", "claims/folder.yaml": "error", "claims/dangling.yaml": "error"}


def test_the_revision_of_a_clean_clone_is_not_dirty_while_its_report_is_staged(tmp_path):
    """A run's staging directory sits beside the report directory, untracked, while the report is written: the
    revision the report states is the commit's, not '+dirty'; an edit still makes it dirty."""

    def git(*arguments: str) -> None:
        subprocess.run(["git", *arguments], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("a\n", encoding="utf-8")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    _report.claim_staging(_report.staging_dir_for(tmp_path / "reports", "run1"))
    assert not _revision(tmp_path).endswith("+dirty")
    (tmp_path / "a.txt").write_text("b\n", encoding="utf-8")
    assert _revision(tmp_path).endswith("+dirty")
