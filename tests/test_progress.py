"""Progress of ``claims verify``: the records, the status line, the terminal and the quiet non-terminal.

The status line is tested as text (a formatter of records), and the live display with streams
that say they are terminals; a real terminal is never needed.
"""

from __future__ import annotations

import io
import json
import sys
import textwrap

import pytest
from test_loading import claim, claim_file, claims_dir

import impl
from claims_harness import SeedRun
from claims_harness._running.progress import (
    CHECKS_RECORD,
    PROGRESS_DIR,
    SeedProgress,
    SeedStatus,
    Status,
    eta_seconds,
    read_status,
    run_showing_progress,
    status_line,
    write_record,
)
from claims_harness._session import CheckCounter

NOW = 1_000_000.0
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")


def test_status_line_shows_checks_running_seeds_and_eta():
    status = Status(done=97, total=149, started=NOW - 30, seeds=[
        SeedStatus("ppo-trains-cartpole", 3, 12, 24, NOW - 6), SeedStatus("ppo-trains-cartpole", 4, 6, 24, NOW - 6)])
    # Checks' pace: 30 s * 52 / 97 = 16 s left; seed 4's pace: 6 s * 18 / 6 = 18 s left: the larger wins.
    assert eta_seconds(status, NOW) == pytest.approx(18.0)
    assert status_line(status, NOW, width=200) == ("claims verify [0:30] 97/149 checks | ETA 0:18 | "
                                                   "ppo-trains-cartpole: seed 3 12/24, seed 4 6/24")


def test_status_line_before_collection_and_when_nothing_is_known_yet():
    assert status_line(Status(), NOW) == "claims verify collecting checks"
    assert status_line(Status(done=0, total=10, started=NOW - 3725), NOW) == "claims verify [1:02:05] 0/10 checks"
    assert eta_seconds(Status(done=0, total=10, started=NOW), NOW) is None


def test_status_line_fits_the_terminal():
    seeds = [SeedStatus(f"claim-with-a-long-name-{i}", i, 1, 9, NOW - 1) for i in range(5)]
    line = status_line(Status(1, 5, NOW - 1, seeds), NOW, width=60)
    assert len(line) == 59 and line.endswith("...")
    assert line == "claims verify [0:01] 1/5 checks | ETA 0:08 | claim-with-..."


def test_records_written_by_checks_and_seeds_are_read_back(tmp_path):
    write_record(str(tmp_path), CHECKS_RECORD, {"done": 2, "total": 5, "started": NOW})
    progress = SeedProgress(str(tmp_path), "a-claim", 7)
    progress(3, 10)
    progress(4, 10)  # within 0.2 s of the last write: not written
    (tmp_path / "seed-garbled.json").write_text("{", encoding="utf-8")  # caught mid-replace: skipped
    status = read_status(tmp_path)
    assert (status.done, status.total, status.started) == (2, 5, NOW)
    assert [(s.claim, s.seed, s.iteration, s.iterations) for s in status.seeds] == [("a-claim", 7, 3, 10)]
    progress(10, 10)  # the last iteration is always written
    assert read_status(tmp_path).seeds[0].iteration == 10
    progress.close()
    assert read_status(tmp_path).seeds == []


def test_without_a_directory_nothing_is_written(tmp_path):
    write_record(None, CHECKS_RECORD, {"done": 1})
    write_record(str(tmp_path / "on-another-machine"), CHECKS_RECORD, {"done": 1})
    SeedProgress(None, "a-claim", 0)(1, 2)
    assert not (tmp_path / "on-another-machine").exists()


# A stand-in for pytest: writes a record where claims verify said, prints two lines, exits 3.
CHILD = textwrap.dedent(f"""\
    import json, os, time
    directory = os.environ.get("{PROGRESS_DIR}")
    print("progress dir set:", directory is not None, flush=True)
    if directory:
        with open(os.path.join(directory, "{CHECKS_RECORD}"), "w") as f:
            json.dump({{"done": 1, "total": 2, "started": time.time()}}, f)
    time.sleep(0.5)
    print("second line", flush=True)
    raise SystemExit(3)
""")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_terminal_the_status_line_is_drawn_below_the_output_and_cleared(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    out, err = Terminal(), Terminal()
    assert run_showing_progress([sys.executable, "-c", CHILD], out, err, interval=0.05) == 3
    assert out.getvalue() == "progress dir set: True\nsecond line\n"
    drawn = err.getvalue()
    assert "\r\x1b[Kclaims verify [0:00] 1/2 checks" in drawn
    assert drawn.endswith("\r\x1b[K")  # nothing is left on the line when the run ends


@pytest.mark.parametrize("terminal", ["stdout", "stderr", "both, with a debugger"])
def test_not_in_a_terminal_the_output_is_untouched_and_no_record_is_asked_for(capfd, terminal):
    streams = {"stdout": (Terminal(), io.StringIO()), "stderr": (io.StringIO(), Terminal())}
    out, err = streams.get(terminal, (Terminal(), Terminal()))
    debugger = ["--pdb"] if "debugger" in terminal else []
    assert run_showing_progress([sys.executable, "-c", CHILD, *debugger], out, err, interval=0.05) == 3
    captured = capfd.readouterr()
    assert captured.out == "progress dir set: False\nsecond line\n"
    assert "\x1b" not in captured.err + out.getvalue() + err.getvalue()


def test_the_plugin_counts_checks_done_of_total(pytester, monkeypatch):
    claims_dir(pytester.path, {"a.yaml": claim_file(claim("first"), claim("second"), claim("third"))})
    records = pytester.path / "progress"
    records.mkdir()
    monkeypatch.setenv(PROGRESS_DIR, str(records))
    result = pytester.runpytest_inprocess("claims", *PLUGINS_OFF)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    record = json.loads((records / CHECKS_RECORD).read_text(encoding="utf-8"))
    assert (record["done"], record["total"]) == (3, 3)


def test_under_xdist_the_total_comes_from_the_workers_collection(tmp_path):
    """The controller collects nothing itself; xdist tells it each worker's collected ids."""
    from xdist import newhooks

    assert hasattr(newhooks, "pytest_xdist_node_collection_finished")
    counter = CheckCounter(str(tmp_path))
    counter.pytest_xdist_node_collection_finished(node=None, ids=["a", "b"])
    assert json.loads((tmp_path / CHECKS_RECORD).read_text(encoding="utf-8"))["total"] == 2


def test_the_training_loops_report_each_iteration_and_train_the_same():
    config = impl.PPOConfig(total_env_steps=512, eval_every=0)
    calls: list[tuple[int, int]] = []
    reported = impl.train_ppo_cartpole(config, 0, impl, progress=lambda *call: calls.append(call))
    assert calls == [(1, 2), (2, 2)]
    silent = impl.train_ppo_cartpole(config, 0, impl)
    assert reported.final_eval_return == silent.final_eval_return
    assert all((reported.diagnostics[k] == silent.diagnostics[k]).all() for k in ("loss", "kl_k3"))

    calls.clear()
    history = impl.train_gru_policy(0, 2, prompts_per_batch=2, group_size=2, ppo_epochs=1, hidden_size=4,
                                    eval_every=1, progress=lambda *call: calls.append(call))
    assert calls == [(1, 2), (2, 2)]
    assert history == impl.train_gru_policy(0, 2, prompts_per_batch=2, group_size=2, ppo_epochs=1, hidden_size=4,
                                            eval_every=1)


def test_a_loop_without_a_progress_argument_is_called_without_one():
    run = SeedRun(impl=None, seed=5, progress=lambda iteration, iterations: None)

    def students_loop(config, seed):  # an implementation that knows nothing of progress
        return config, seed

    def reporting_loop(config, seed, progress=None):
        return progress

    assert run.call_reporting(students_loop, "config", run.seed) == ("config", 5)
    assert run.call_reporting(reporting_loop, "config", run.seed) is run.progress
