"""Implementations that crash, hang or hoard: each costs exactly its own checks an error row saying why.

Every fault replaces ``leave_one_out_advantages`` (``tests/fixtures/faults/``), which one Hypothesis
property check calls; a symbolic check that uses no implementation function and a property check
that uses another one must still pass, and the report must be this run's, complete, and written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from conftest import pythonpath

from claims_harness._running.sandbox import Containment

PROJECT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODELINE = "# yaml-language-server: $schema=schema.json\n"
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")
# Seconds: the stated limit of a check that hangs (the supervisor kills it a grace period later), and of one
# that answers, which must have time to draw its examples on a loaded machine.
HANGS, ANSWERS = 1, 120

CLAIMS = MODELINE + """\
title: "Faults"
steps: ["4.2.4", "4.2.5"]
claims:
  - id: faulty-loo
    where: "4.2.4"
    statement: Leave-one-out advantages are G/(G-1) times the centred ones.
    sources: [ahmadian2024]
    checks:
      - kind: property
        verifier: baselines.loo_identity_property
        timeout: {timeout}
        expect:
          holds: true
  - id: symbolic-control
    where: "4.2.4"
    statement: The leave-one-out identity, in sympy.
    sources: [ahmadian2024]
    checks:
      - kind: symbolic
        verifier: baselines.loo_identity
        expect:
          residual: {exact: 0}
  - id: property-control
    where: "4.2.5"
    statement: The Bernoulli policy's logit score is A - p.
    sources: [williams1992]
    checks:
      - kind: property
        verifier: bernoulli.logit_score_property
        expect:
          holds: true
"""

# fault -> the faulty check's status, and what its error row must say
FAULTS = {
    "exits": ("error", "exit status 1"),
    "segfaults": ("error", "SIGSEGV"),
    "kills_itself": ("error", "SIGKILL"),
    "exits_quietly_after_printing": ("error", "exit status 3"),
    "sleeps": ("error", "time limit"),
    # The alarm is the verifier's, in a process the implementation cannot reach: it fires whatever the latter does.
    "cancels_alarm": ("error", "ran past its time limit"),
    "swallows_timeout": ("error", "ran past its time limit"),
    "allocates": ("error", "MemoryError"),
    "raises_keyboard_interrupt": ("error", "KeyboardInterrupt"),
    "exits_cleanly": ("error", "SystemExit"),
    # Correct answers with side effects that must stay in the check's own worker.
    "rebinds_a_function": ("passed", ""),
    "changes_directory": ("passed", ""),
}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
            ) -> pytest.Pytester:
    shutil.copy(PROJECT / "Module_4_Sources.md", pytester.path)
    claims = pytester.path / "claims"
    claims.mkdir()
    fault = request.node.callspec.params.get("fault") if hasattr(request.node, "callspec") else None
    answers = fault is not None and FAULTS[fault][0] == "passed"
    (claims / "faults.yaml").write_text(CLAIMS.replace("{timeout}", str(ANSWERS if answers else HANGS)),
                                        encoding="utf-8")
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("PYTHONPATH", pythonpath(FIXTURES))  # for the runs in a subprocess
    return pytester


def run(project: pytest.Pytester, fault: str, *extra: str) -> tuple[pytest.RunResult, dict]:
    args = ("claims", *PLUGINS_OFF, "--claims-impl", f"faults.{fault}", "--claims-report", "out", *extra)
    result = project.runpytest_subprocess(*args) if "-n" in extra else project.runpytest_inprocess(*args)
    results_file = project.path / "out" / "claims.json"
    return result, json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else {}


def rows(results: dict) -> dict[str, tuple[str, str]]:
    return {row["id"]: (row["status"], " ".join(check["error"] or "" for check in row["checks"]))
            for row in results["claims"]}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_faulty_implementation_costs_its_own_check_an_error_row(project, fault):
    status, says = FAULTS[fault]
    result, results = run(project, fault)
    found = rows(results)
    assert found["faulty-loo"][0] == status, found["faulty-loo"]
    assert says in found["faulty-loo"][1], found["faulty-loo"][1]
    assert "Flaky" not in found["faulty-loo"][1]  # a timeout inside Hypothesis reads as a timeout
    assert found["symbolic-control"][0] == "passed"
    assert found["property-control"][0] == "passed", found["property-control"]
    assert results["run"]["complete"] is True
    if status == "error":
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
        result.assert_outcomes(passed=2, failed=1)
    else:
        result.assert_outcomes(passed=3)


def test_under_xdist_the_crashed_check_is_a_row_not_a_gap(project):
    fault = "exits"
    result, results = run(project, fault, "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    found = rows(results)
    assert set(found) == {"faulty-loo", "symbolic-control", "property-control"}
    assert found["faulty-loo"][0] == "error" and FAULTS[fault][1] in found["faulty-loo"][1]
    assert results["run"]["complete"] is True


def test_an_implementation_that_exits_on_import_is_one_error_and_pytest_survives(project):
    result, results = run(project, "exits_on_import")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "exit status 1" in result.stdout.str()
    assert result.stdout.str().count("ERROR ::claims-implementation") == 1
    found = rows(results)
    assert found["symbolic-control"][0] == "passed"  # a check that calls no function still ran
    assert results["run"]["complete"] is False


def test_a_worker_is_killed_together_with_what_it_started(project):
    """The supervisor kills the worker's process group: nothing it started outlives the check."""
    from claims_harness.engine import run_isolated
    from claims_harness.errors import CheckCrashed

    pid_file = project.path / "child.pid"

    def start_a_sleeper_and_hang() -> None:
        child = subprocess.Popen(["sleep", "600"])
        pid_file.write_text(str(child.pid))
        time.sleep(600)

    with pytest.raises(CheckCrashed, match="time limit"):
        run_isolated(start_a_sleeper_and_hang, 0.5, "the test's check")
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not alive(pid):
            break
        time.sleep(0.1)  # give the kill a moment to land
    assert not alive(pid)


# An at-fork callback of the judge's in which a Ctrl-C lands, as one may in logging's (it releases its lock there).
_CTRL_C_IN_A_FORK_CALLBACK = False


def _ctrl_c_in_a_fork_callback() -> None:
    if _CTRL_C_IN_A_FORK_CALLBACK:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100):  # bytecodes, between which Python runs the signal's handler
            pass


os.register_at_fork(after_in_parent=_ctrl_c_in_a_fork_callback)


def test_a_ctrl_c_while_the_judge_forks_a_worker_ends_the_run_and_the_worker(tmp_path):
    """A KeyboardInterrupt raised inside an at-fork callback is reported as unraisable and dropped: the run went on
    as if no one had pressed Ctrl-C. It is raised once the fork has returned, and the worker just started is
    killed."""
    from claims_harness.engine import run_isolated

    global _CTRL_C_IN_A_FORK_CALLBACK
    pid_file = tmp_path / "worker.pid"

    def record_and_hang() -> None:
        pid_file.write_text(str(os.getpid()))
        time.sleep(600)

    # Ctrl-C as in a terminal: the process that started this one (pytest-xdist's) may have left SIGINT ignored or
    # blocked.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _CTRL_C_IN_A_FORK_CALLBACK = True
    try:
        with pytest.raises(KeyboardInterrupt):
            run_isolated(record_and_hang, 1, "the test's check")
    finally:
        _CTRL_C_IN_A_FORK_CALLBACK = False
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    # Killed before or after it wrote its pid (and reaped: nothing is written later).
    assert not pid_file.is_file() or not alive(int(pid_file.read_text()))


def test_what_a_worker_forks_keeps_the_workers_handlers_not_the_judges():
    """The worker takes the judge's handlers back as it starts, then sets its own (SIGTERM's default action); a
    process it forks in turn (a seed pool's) has the worker's."""
    from claims_harness.engine import run_isolated

    def sigterm_in_a_child_of_the_worker() -> bool:
        child = os.fork()
        if child == 0:
            os._exit(0 if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else 1)
        return os.waitpid(child, 0)[1] == 0

    judges = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        assert run_isolated(sigterm_in_a_child_of_the_worker, 10, "the test's check") is True
    finally:
        signal.signal(signal.SIGTERM, judges)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet, as in a container without init, has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def supervised_task(kind: str) -> str:
    """A worker's task that answers, raises, dies or hangs."""
    if kind == "raises":
        raise ValueError("no")
    if kind == "exits":
        os._exit(3)
    if kind == "hangs":
        time.sleep(600)
    if kind == "exits, leaving a child":  # the child holds the answer pipe open: the exit is seen all the same
        if os.fork() == 0:
            time.sleep(600)
        os._exit(4)
    return kind


@pytest.mark.parametrize("fresh", [False, True], ids=["lanes kept", "a fresh lane each"])
def test_the_lanes_run_several_tasks_and_say_how_each_ended(fresh):
    """The one scheduler of many tasks (checks, audit runs, mutants): answers, raises, dies and hangs, on two
    lanes; a lane that dies or hangs costs only its task, and its children end with it."""
    from claims_harness.engine import TIMED_OUT, on_lanes

    kinds = ["answers", "raises", "exits", "hangs", "answers", "exits, leaving a child", "answers"]
    started = time.monotonic()
    ended = {}
    on_lanes(len(kinds), lambda number: supervised_task(kinds[number]), 2, ended.__setitem__,
             limit_of=lambda number: 1.0 if kinds[number] == "hangs" else 60.0, fresh=fresh)
    assert time.monotonic() - started < 30
    assert sorted(ended) == list(range(len(kinds)))
    assert [ended[number].value for number in (0, 4, 6)] == ["answers"] * 3
    assert ended[1].value is None and "ValueError: no" in ended[1].why and not ended[1].died
    assert (ended[2].value, ended[2].why, ended[2].died) == (None, "exit status 3", True)
    assert (ended[3].value, ended[3].why, ended[3].died) == (None, TIMED_OUT, True)
    assert (ended[5].value, ended[5].why, ended[5].died) == (None, "exit status 4", True)


def calls_leave_one_out(impl: str, connection) -> list:
    """A check's worker: one call of the implementation, through its server."""
    from claims_harness.engine import connect

    return connect(connection, impl).leave_one_out_advantages([[1.0, 2.0]]).tolist()


def test_a_host_that_cannot_import_or_dies_is_a_check_error_and_the_next_host_works(monkeypatch):
    """The implementation's host, from the judge's side: its death while importing, or while a check's server
    answers, is that check's error naming the exit status; the next check gets a new host."""
    from claims_harness.engine import close_hosts, implementation_host, run_isolated, server_starter
    from claims_harness.errors import CheckCrashed

    monkeypatch.syspath_prepend(str(FIXTURES))
    directory = str(FIXTURES)
    try:
        with pytest.raises(CheckCrashed, match="exit status 1"):
            implementation_host("faults.exits_on_import", directory)
        with pytest.raises(CheckCrashed, match="exit status 1"):
            run_isolated(partial(calls_leave_one_out, "faults.exits"), 60, "a check",
                         server_starter("faults.exits", directory))
        starter = server_starter("faults.changes_directory", directory)
        assert run_isolated(partial(calls_leave_one_out, "faults.changes_directory"), 60, "a check", starter) == [
            [-1.0, 1.0]]
        host = implementation_host("faults.changes_directory", directory)
        os.kill(host.process.pid, signal.SIGKILL)
        host.process.join(5)
        assert not host.alive
        assert run_isolated(partial(calls_leave_one_out, "faults.changes_directory"), 60, "a check", starter) == [
            [-1.0, 1.0]]
        assert implementation_host("faults.changes_directory", directory) is not host
    finally:
        close_hosts()


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_what_an_implementation_does_at_import_reaches_no_verdict_and_no_label(project, workers):
    result, results = run(project, "meddles_at_import", *workers)
    found = rows(results)
    assert found["faulty-loo"][0] == "failed", found["faulty-loo"]
    assert found["symbolic-control"][0] == "passed" and found["property-control"][0] == "passed", found
    assert (results["run"]["impl"], results["run"]["profile"], results["run"]["seed"]) == (
        "faults.meddles_at_import", "smoke", 0)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def start_run(project: pytest.Pytester, command: tuple[str, ...], fault: str, record: Path, timeout: float
              ) -> subprocess.Popen:
    """``python *command`` in its own process, on the fault claims (each check limited to ``timeout`` s) against
    ``faults.<fault>``, which writes what it records to ``record`` ($CLAIMS_TEST_PID_FILE); the report goes to out/."""
    (project.path / "claims" / "faults.yaml").write_text(CLAIMS.replace("{timeout}", str(timeout)), encoding="utf-8")
    shutil.copy(PROJECT / "pyproject.toml", project.path)
    environment = {**os.environ, "PYTHONPATH": pythonpath(FIXTURES), "CLAIMS_TEST_PID_FILE": str(record),
                   "CLAIMS_TEST_PROJECT": str(project.path)}
    options = ("--claims-impl", f"faults.{fault}", "--claims-report", "out")
    arguments = [*command[:3], *options, *command[3:]] if "verify" in command else [*command, *options]
    return subprocess.Popen([sys.executable, *arguments], cwd=project.path, env=environment,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("command", [
    ("-m", "pytest", "claims", *PLUGINS_OFF),
    ("-m", "claims_harness.cli", "verify"),  # the checks left to run, in the command's own workers
])
def test_the_process_that_judges_never_imports_the_implementation(project, tmp_path, command):
    """Only the implementation's hosts import it, each in a process (and, where the machine allows, a PID namespace)
    of its own: whatever it does at import cannot reach a verdict, the options or the report."""
    pid_file = tmp_path / "importers"
    judge = start_run(project, command, "records_importers", pid_file, ANSWERS)
    assert judge.wait(timeout=600) == (1 if "verify" in command else 0)  # verify: these claims cover no statement
    importers = set(pid_file.read_text().split())
    assert importers and f"{os.stat('/proc/self/ns/pid').st_ino}:{judge.pid}" not in importers
    assert {row["status"] for row in json.loads((project.path / "out" / "claims.json").read_text())["claims"]} == {
        "passed"}


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_the_implementation_cannot_reach_what_the_judge_has_open(project, tmp_path, workers):
    """The zygote closes the judge's descriptors before importing the implementation: nothing it or a check
    forked from it writes reaches pytest-xdist's channel or a file the judge holds."""
    marker = tmp_path / "held-by-the-judge"
    project.makeconftest(f"HELD = open({str(marker)!r}, 'w')\n")
    named = tmp_path / "named"
    assert start_run(project, ("-m", "pytest", "claims", *PLUGINS_OFF, *workers), "lists_descriptors", named,
                     ANSWERS).wait(timeout=600) == 0
    seen = named.read_text(encoding="utf-8").split("\n")  # from the import check at the start, and the zygote
    assert "/dev/null" in seen and str(marker) not in seen, seen


@pytest.mark.parametrize("command", [
    ("-m", "pytest", "claims", *PLUGINS_OFF),
    ("-m", "claims_harness.cli", "verify"),  # the checks left to run, in the command's own workers
    ("-m", "claims_harness.cli", "verify", "-n", "2"),  # on two lanes, which the command must not leave running
])
def test_sigterm_ends_the_run_as_ctrl_c_does_and_leaves_no_process_behind(project, tmp_path, command):
    """What CI and job schedulers send: the report is labelled interrupted, and every process of the run (the hung
    check's worker, the implementation's server and what it started, in their namespace) is gone."""
    pid_file = tmp_path / "worker.pid"
    run = start_run(project, command, "hangs_recording_pid", pid_file, 120)
    try:
        for _ in range(600):
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.1)
        assert pid_file.read_text()
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == (2 if "pytest" in command else 1)  # interrupted; the command: not green
    finally:
        run.kill()
    for _ in range(50):
        if not processes_of_the_run(pid_file):
            break
        time.sleep(0.1)
    assert not processes_of_the_run(pid_file)
    found = json.loads((project.path / "out" / "claims.json").read_text(encoding="utf-8"))
    assert found["run"]["complete"] is False and "interrupted" in found["run"]["incomplete"]


def processes_of_the_run(pid_file: Path) -> list[int]:
    """The living processes started with the run's environment (``pid_file`` is in it): seen from here, whatever
    namespace they are in."""
    marker = f"CLAIMS_TEST_PID_FILE={pid_file}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes() and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:  # ended meanwhile, or not ours to read
                continue
    return found


def test_answers_forged_on_every_descriptor_are_read_as_data_and_the_verdict_stays_the_verifiers(project):
    """The implementation holds only its own channel to the check's worker: what it writes there is at most its
    answer to the call, and the worker's answer to the judge is out of its reach."""
    result, results = run(project, "forges_answers")
    found = rows(results)
    assert found["faulty-loo"][0] in {"failed", "error"}, found["faulty-loo"]
    assert found["symbolic-control"][0] == "passed" and found["property-control"][0] == "passed", found
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def containment() -> Containment:
    """How this machine contains an implementation's process (``claims_harness._running.sandbox``)."""
    from claims_harness.engine import close_hosts, implementation_host

    try:
        return implementation_host("impl", str(PROJECT)).containment
    finally:
        close_hosts()


def test_what_the_implementation_starts_dies_with_its_check_and_the_project_and_cache_are_out_of_reach(project,
                                                                                                      tmp_path):
    record = tmp_path / "record"
    cache = project.path / ".claims-cache"
    cache.mkdir()
    (cache / "an-entry").write_text("the judge's", encoding="utf-8")
    run = start_run(project, ("-m", "claims_harness.cli", "verify", "--no-cache"), "escapes", record, ANSWERS)
    run.wait(timeout=600)
    time.sleep(4)  # past the grandchild's own wait: had it lived, it would have written by now
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert not [line for line in lines if line.get("survived")]
    assert not processes_of_the_run(record)
    assert rows(json.loads((project.path / "out" / "claims.json").read_text(encoding="utf-8")))["faulty-loo"][0] == (
        "passed")
    held = containment()
    if held.readonly:  # what the machine allowed, as the docs say (docs/engine.md, the threat model)
        assert lines and all(not line["wrote"] and line["cache"] == [] for line in lines), lines
        assert not (project.path / "claims" / "planted.yaml").exists()
    else:
        assert held.why_not


def test_a_chdir_a_umask_and_closed_streams_at_import_stay_in_the_implementations_process(project, tmp_path):
    run = start_run(project, ("-m", "claims_harness.cli", "verify"), "confines_its_import", tmp_path / "unused",
                    ANSWERS)
    run.wait(timeout=600)
    results = project.path / "out" / "claims.json"
    assert results.stat().st_mode & stat.S_IRUSR and (project.path / "out" / "claims_report.md").is_file()
    found = json.loads(results.read_text(encoding="utf-8"))
    assert {status for status, _ in rows(found).values()} == {"passed"}, rows(found)
    assert found["run"]["complete"] is True


RECORDS_ITS_IMPORTER = """\
import os
with open(os.environ["CLAIMS_TEST_PID_FILE"], "a", encoding="utf-8") as _file:
    _file.write(os.environ.get("HOME", "") + "\\n")
"""


def test_modules_beside_the_implementation_never_reach_the_judges_import_path(project, tmp_path):
    """A ``sitecustomize.py``, or a module named like one of the harness's dependencies, in the directory ``claims
    verify`` starts in is found only by the implementation's process (whose home is its own), never by the judge."""
    record = tmp_path / "importers"
    (project.path / "claims" / "faults.yaml").write_text(CLAIMS.replace("{timeout}", str(ANSWERS)), encoding="utf-8")
    shutil.copy(PROJECT / "pyproject.toml", project.path)
    (project.path / "student_rl.py").write_text(
        "import impl\nfrom impl import *  # noqa: F403\n\n__claims_reference_fallback__ = True\n", encoding="utf-8")
    for name in ("sitecustomize.py", "hypothesis.py", "scipy.py", "yaml.py", "jinja2.py"):
        (project.path / name).write_text(RECORDS_ITS_IMPORTER + "raise ImportError('not the real one')\n",
                                         encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": pythonpath()}
    command = [str(Path(sys.executable).parent / "claims"), "verify", "--claims-impl", "student_rl",
               "--claims-report", "out"]
    done = subprocess.run(command, cwd=project.path, env={**environment, "CLAIMS_TEST_PID_FILE": str(record)},
                          capture_output=True, text=True, timeout=600)
    homes = record.read_text(encoding="utf-8").split() if record.is_file() else []
    assert all("claims-implementation-" in home for home in homes), homes
    found = json.loads((project.path / "out" / "claims.json").read_text(encoding="utf-8"))
    assert {status for status, _ in rows(found).values()} == {"passed"}, (rows(found), done.stderr[-2000:])
