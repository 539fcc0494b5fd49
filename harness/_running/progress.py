"""Progress of a long ``claims verify`` in a terminal: checks done of total, the running seeds, an ETA.

``claims verify`` runs pytest in a subprocess, which may hand checks to xdist workers, which may
hand experiment seeds to a process pool or to Dask workers. Whoever knows something writes it as
a small JSON record into the directory named by ``$CLAIMS_PROGRESS_DIR``, one file per writer,
replaced atomically: the controlling pytest process writes how many checks are done of how many
(``checks.json``), and whoever runs a seed writes its iteration (``seed-*.json``). The ``claims``
process reads the directory twice a second and draws one status line under pytest's output.

Only ``claims verify`` sets the variable, and only when both its stdout and stderr are terminals,
so plain ``pytest`` and CI logs see nothing of this. Writing is best effort: a Dask worker on
another machine has no such directory and writes nothing, and no check ever fails for progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

PROGRESS_DIR = "CLAIMS_PROGRESS_DIR"
CHECKS_RECORD = "checks.json"
_SEED_PREFIX = "seed-"
_SEED_WRITE_INTERVAL = 0.2
_ERASE_LINE = "\r\x1b[K"
_INTERACTIVE = ("--pdb", "--trace")


def progress_dir() -> str | None:
    """The directory progress records go to in this run, if someone is showing progress."""
    return os.environ.get(PROGRESS_DIR) or None


def write_record(directory: str | None, name: str, record: dict[str, Any]) -> None:
    """Replace ``directory/name`` with ``record`` as JSON; nothing when there is no such directory."""
    if not directory or not os.path.isdir(directory):
        return
    path = Path(directory) / name
    temporary = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        temporary.write_text(json.dumps(record), encoding="utf-8")
        temporary.replace(path)
    except OSError:  # a full disk or a vanished directory costs the status line, never the check
        pass


class SeedProgress:
    """A seed's ``progress(iteration, iterations)`` callback: writes its record, 5 times a second at most."""

    def __init__(self, directory: str | None, claim_id: str, seed: int):
        self.directory = directory
        self.name = f"{_SEED_PREFIX}{os.getpid()}-{threading.get_ident()}-{seed}.json"
        self.record = {"claim": claim_id, "seed": seed, "iteration": 0, "iterations": None, "started": time.time()}
        self.written = 0.0

    def __call__(self, iteration: int, iterations: int) -> None:
        now = time.monotonic()
        if not self.directory or (now - self.written < _SEED_WRITE_INTERVAL and iteration < iterations):
            return
        self.written = now
        self.record.update(iteration=int(iteration), iterations=int(iterations))
        write_record(self.directory, self.name, self.record)

    def close(self) -> None:
        if self.directory:
            (Path(self.directory) / self.name).unlink(missing_ok=True)


@dataclass(frozen=True)
class SeedStatus:
    claim: str
    seed: int
    iteration: int
    iterations: int
    started: float


@dataclass(frozen=True)
class Status:
    """What the records say: checks done of total (None before collection ends), and the running seeds."""

    done: int = 0
    total: int | None = None
    started: float | None = None
    seeds: list[SeedStatus] = field(default_factory=list)


def read_status(directory: Path) -> Status:
    """The status the records in ``directory`` describe; a record being replaced is skipped, not an error."""
    checks = _read(directory / CHECKS_RECORD) or {}
    seeds = []
    for path in sorted(directory.glob(f"{_SEED_PREFIX}*.json")):
        record = _read(path)
        if record and record.get("iterations"):
            seeds.append(SeedStatus(record["claim"], record["seed"], record["iteration"], record["iterations"],
                                    record["started"]))
    return Status(checks.get("done", 0), checks.get("total"), checks.get("started"),
                  sorted(seeds, key=lambda s: (s.claim, s.seed)))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def eta_seconds(status: Status, now: float) -> float | None:
    """Seconds left: the larger of the checks' pace so far and the slowest running seed's pace; None if unknown.

    Checks differ a thousandfold in cost, so the checks' pace alone misjudges a run that ends on
    its experiments; the running seeds' own iterations say how long those will still take.
    """
    estimates = []
    if status.total is not None and status.started is not None and status.done:
        estimates.append((now - status.started) * (status.total - status.done) / status.done)
    estimates += [(now - seed.started) * (seed.iterations - seed.iteration) / seed.iteration
                  for seed in status.seeds if seed.iteration]
    return max(estimates) if estimates else None


def status_line(status: Status, now: float, width: int = 80) -> str:
    """One line, at most ``width - 1`` characters: checks done of total, ETA, running seeds' iterations.

    The seeds come last: on a narrow terminal they are what is cut.
    """
    parts = ["collecting checks" if status.total is None else f"{status.done}/{status.total} checks"]
    eta = eta_seconds(status, now)
    if eta is not None:
        parts.append(f"ETA {_clock(eta)}")
    claims: dict[str, list[str]] = {}
    for seed in status.seeds:
        claims.setdefault(seed.claim, []).append(f"seed {seed.seed} {seed.iteration}/{seed.iterations}")
    parts += [f"{claim}: {', '.join(seeds)}" for claim, seeds in claims.items()]
    elapsed = f"[{_clock(now - status.started)}] " if status.started is not None else ""
    line = "claims verify " + elapsed + " | ".join(parts)
    return line if len(line) < width else line[:max(width - 4, 0)] + "..."


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(max(int(round(seconds)), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def shows_progress(out: TextIO, err: TextIO) -> bool:
    """Progress is drawn only for a person at a terminal: both streams are TTYs that understand ANSI erasing."""
    return out.isatty() and err.isatty() and os.environ.get("TERM") != "dumb"


def run_showing_progress(command: list[str], out: TextIO | None = None, err: TextIO | None = None,
                         interval: float = 0.5, cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Run ``command`` (a pytest run) to the end; its exit status. In a terminal, draw the status line meanwhile.

    Not in a terminal, the command inherits stdout and stderr untouched. In a terminal, its output
    is copied line by line above the status line (stderr merged into stdout; colours kept with
    ``PY_COLORS`` unless the environment says otherwise).
    """
    out, err = out or sys.stdout, err or sys.stderr
    # A debugger's prompt has no newline: copied line by line, it would never show.
    if not shows_progress(out, err) or any(argument in _INTERACTIVE for argument in command):
        with subprocess.Popen(command, cwd=cwd, env=env) as process, _passing_termination_to(process):
            return _wait_through_interrupt(process)
    line = _StatusLine(out, err)
    with tempfile.TemporaryDirectory(prefix="claims-progress-") as directory:
        env = {**(os.environ if env is None else env), PROGRESS_DIR: directory, "COLUMNS": str(line.width)}
        if "PY_COLORS" not in env and "NO_COLOR" not in env:
            env["PY_COLORS"] = "1"
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd) as process, \
                _passing_termination_to(process):
            reader = threading.Thread(target=_copy_lines, args=(process.stdout, line), daemon=True)
            reader.start()
            try:
                while not _ended(process, interval):
                    line.show(status_line(read_status(Path(directory)), time.time(), line.width))
            except KeyboardInterrupt:
                _wait_through_interrupt(process)
            finally:
                reader.join()
                line.clear()
    return process.returncode


def _wait_through_interrupt(process: subprocess.Popen) -> int:
    """Wait for ``process``; a Ctrl-C reached it too (one process group), so let it write its labelled report."""
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


@contextlib.contextmanager
def _passing_termination_to(process: subprocess.Popen) -> Iterator[None]:
    """While ``process`` runs, a SIGTERM to this command goes to it as well: pytest ends the run as at Ctrl-C,
    labels its report, and this command returns its exit status instead of leaving it running alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: process.send_signal(signal.SIGTERM))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ended(process: subprocess.Popen, seconds: float) -> bool:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _copy_lines(stream: IO[bytes], line: _StatusLine) -> None:
    for raw in iter(stream.readline, b""):
        line.output(raw.decode(errors="replace"))


class _StatusLine:
    """The last line of the terminal: output from the run goes above it, the status is redrawn in place."""

    def __init__(self, out: TextIO, err: TextIO):
        self.out, self.err = out, err
        self.width = shutil.get_terminal_size().columns
        self.text = ""
        self.lock = threading.Lock()

    def show(self, text: str) -> None:
        with self.lock:
            self.text = text
            self.err.write(_ERASE_LINE + text)
            self.err.flush()

    def output(self, text: str) -> None:
        with self.lock:
            if self.text:
                self.err.write(_ERASE_LINE)
                self.err.flush()
            self.out.write(text)
            self.out.flush()
            if self.text and text.endswith("\n"):
                self.err.write(self.text)
                self.err.flush()

    def clear(self) -> None:
        with self.lock:
            if self.text:
                self.err.write(_ERASE_LINE)
                self.err.flush()
                self.text = ""
