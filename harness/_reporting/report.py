"""Writing a run's reports: the results document (``claims_harness._reporting.results``), its Markdown and HTML
renderings and the annotated text, staged beside the report directory and moved into it in one step."""


from __future__ import annotations

import ctypes
import errno
import glob
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from claims_harness._claims.course import configures_course, load_course
from claims_harness._claims.results_file import RESULTS_FILE, results_text
from claims_harness._reporting.html import HTML_FILE, render_html
from claims_harness._reporting.markdown import render_markdown
from claims_harness._reporting.results import build_results
from claims_harness._reporting.text_page import PAGE_FILE, render_page
from claims_harness._running.options import RunOptions
from claims_harness._text.summary import TextReport
from claims_harness.errors import ReportNotWritten

MARKDOWN_FILE = "claims_report.md"


def write_reports(directory: Path, payloads: list[dict[str, Any]], lessons: list[dict[str, Any]],
                  options: RunOptions, started: float, root: Path, completeness: dict[str, Any],
                  given: Sequence[str] = (), text: TextReport | None = None) -> dict[str, Any]:
    """Write ``claims.json``, ``claims_report.md``, ``claims_report.html`` and ``figures/`` to ``directory``.

    With a readable course text (``text``), also the annotated text, ``claims_text.html``, which is
    never committed (it quotes the text).

    Everything is first written where the run staged its figures (``options.staging_dir``, or a new
    directory beside ``directory``), which then replaces ``directory`` in one step with signals held
    (:func:`_move_together`), so a full disk or a Ctrl-C leaves the previous report whole and a new
    one is never half there.
    ``completeness`` (``id``, ``complete``, ``incomplete``, ``selection``: the run's, from the plugin or the
    warm path of ``claims verify``) goes into ``run``, and every format shows it; ``given`` is as
    :func:`build_results` takes it.
    Returns the results.
    """
    results = build_results(payloads, lessons, options, started, root, given, text.section if text else None)
    results["run"].update(completeness)
    staging = Path(options.staging_dir) if options.staging_dir else staging_dir_for(directory, str(os.getpid()))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
        texts = {RESULTS_FILE: results_text(results),
                 MARKDOWN_FILE: render_markdown(results), HTML_FILE: render_html(results, staging)}
        if text is not None and text.state is not None:
            texts[PAGE_FILE] = render_page(text.state, text.catalogue, results)
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        (staging / STAGING_OWNER).unlink(missing_ok=True)  # the run's mark, not part of the report
        _move_together(staging, directory, list(texts))
    except OSError as error:
        raise ReportNotWritten(f"the reports could not be written to {directory} ({error}); this run's results are "
                               f"in {_kept_somewhere(results)}") from None
    finally:
        remove_staging(staging)
    return results


def _kept_somewhere(results: dict[str, Any]) -> str:
    """The results, written where this process can write (the temporary directory): the file, or why none."""
    handle, name = tempfile.mkstemp(prefix=f"claims-results-{results['run'].get('id') or os.getpid()}-",
                                    suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(results_text(results))
    except OSError as error:
        return f"no file either ({error})"
    return name


def staging_dir_for(directory: Path, run_id: str) -> Path:
    """Where a run writes its report and figures before they replace ``directory``'s: beside it, or inside it
    when it is a mount point of its own (a rename never crosses file systems)."""
    target = directory.resolve()
    try:
        own_mount = target.is_dir() and target.stat().st_dev != target.parent.stat().st_dev
    except OSError:
        own_mount = False
    return target / f".staging-{run_id}" if own_mount else target.parent / f".{target.name}.staging-{run_id}"


# The file in a staging directory that names the process of the run that made it: a later run removes a staging
# directory whose process is gone (killed before it could remove it), or that is older than STALE_SECONDS.
STAGING_OWNER = ".claims-run-pid"
STALE_SECONDS = 24 * 3600


def claim_staging(staging: Path) -> None:
    """Make a run's staging directory at its start, marked with this process's id (:func:`remove_stale_staging`)."""
    staging.mkdir(parents=True, exist_ok=True)
    (staging / STAGING_OWNER).write_text(f"{os.getpid()}\n", encoding="utf-8")


def remove_staging(staging: Path) -> None:
    """Remove a staging directory (after the move, the previous report), unless a file system is mounted inside it:
    what is mounted there is not the run's to delete."""
    if staging.is_dir() and not staging.is_symlink() and _mount_below(staging) is None:
        shutil.rmtree(staging, ignore_errors=True)


def remove_stale_staging(directory: Path, keep: Path | None = None) -> list[Path]:
    """Remove the staging directories of earlier runs into ``directory`` that no longer exist: the process named in
    the directory (its mark, or the pid its name ends with) is gone, or it is older than a day. A run killed by
    SIGKILL leaves its staging directory (and, on a file system without the one-step exchange, the figures it was
    replacing); the next run into the same directory removes it. Returns what was removed."""
    target = directory.resolve()
    candidates = list(target.parent.glob(f".{glob.escape(target.name)}.staging-*")) if target.parent != target else []
    if target.is_dir():
        candidates += [*target.glob(".staging-*"), *target.glob(".figures-replaced-*")]
    removed = []
    for candidate in candidates:
        if candidate == keep or candidate.is_symlink() or not candidate.is_dir() or not _stale(candidate):
            continue
        remove_staging(candidate)
        if not candidate.exists():
            removed.append(candidate)
    return removed


def _stale(staging: Path) -> bool:
    try:
        age = time.time() - staging.lstat().st_mtime
        mark = staging / STAGING_OWNER
        # Without a mark, a name that ends with a pid (a run without a run id; a run id is 12 hexadecimal digits).
        owner = mark.read_text(encoding="utf-8").strip() if mark.is_file() else staging.name.rpartition("-")[2]
    except (OSError, UnicodeDecodeError):
        return False
    if age > STALE_SECONDS:
        return True
    pid = int(owner) if owner.isdigit() and len(owner) <= 7 else 0  # pid_max is at most 2**22
    return 0 < pid != os.getpid() and not _running(pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except (OSError, OverflowError):
        return False
    return True


def report_directory_problem(directory: Path, root: Path | None = None, impl: str | None = None,
                             looked_in: Path | None = None) -> str | None:
    """Why a report cannot be written to ``directory`` (checked before a run, so that no result is lost at its
    end, and nothing but a report is replaced), or None.

    It must be a directory, or one that can be made, where this process can write. A run replaces the whole report
    directory (what it does not write is kept, as hard links), and removes the previous one: so it must not be the
    project (``root``) or hold it, nor a folder of the course (its claims, verifiers, reference implementation,
    cache, tests or docs, the implementation under test ``impl``, in the project or in ``looked_in``, the directory
    it is looked for in first), nor a directory of claim files or one that configures a course, nor hold the working
    directory, nor have a file system mounted inside it.
    """
    target = directory.resolve()
    existing = next(path for path in (target, *target.parents) if path.exists())
    if not existing.is_dir():
        return (f"{directory} cannot hold a report: {existing} is not a directory; give --claims-report a "
                "directory (made if it does not exist)")
    folder = _course_folder(target, root, impl, looked_in)
    if folder is not None:
        return (f"{directory} cannot hold a report: it is {folder}, and a run replaces its report directory whole; "
                "give --claims-report a directory of its own, e.g. my-report (made if it does not exist)")
    mount = _mount_below(target)
    if mount is not None:
        return (f"{directory} cannot hold a report: {mount} inside it is a mount point, and a run replaces its report "
                "directory whole and removes the previous one; unmount it, or give --claims-report a directory "
                "with no file system mounted inside it")
    try:
        probe = tempfile.NamedTemporaryFile(dir=existing, prefix=".claims-probe-")  # noqa: SIM115
        probe.close()
    except OSError as error:
        return f"{directory} cannot hold a report: {existing} cannot be written ({error.strerror or error})"
    return None


def _course_folder(target: Path, root: Path | None, impl: str | None, looked_in: Path | None) -> str | None:
    """What of the project ``target`` is, when it is something a report must not replace; None otherwise."""
    if target == Path(target.anchor):
        return "the file system's root"
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # the working directory was removed
        here = None
    if root is not None:
        root = root.resolve()
        if target == root:
            return f"the project's root ({root})"
        if root.is_relative_to(target):
            return f"a directory that holds the project ({root})"
        course = load_course(root)
        folders = {course.claims: "the course's claims directory", course.cache: "the course's observation cache",
                   root / course.verifiers.partition(".")[0]: "the course's verifier package",
                   root / course.implementation.partition(".")[0]: "the course's reference implementation",
                   root / "tests": "the project's tests", root / "docs": "the project's documentation"}
        if impl:
            folders |= {base / impl.partition(".")[0]: f"the implementation under test ({impl})"
                        for base in (root, looked_in or here) if base is not None}
        found = next((what for folder, what in folders.items() if folder.resolve() == target), None)
        if found is not None:
            return f"{found}, {target}"
    if here is not None and here != target and here.is_relative_to(target):
        return f"a directory that holds the working directory ({here})"
    if target.is_dir():
        if configures_course(target):
            return f"a course's root ({target / 'pyproject.toml'} has a [tool.claims] table)"
        claim_file = next((path for path in sorted(target.iterdir()) if _is_claim_file(path)), None)
        if claim_file is not None:
            return f"a directory of claim files ({claim_file.name})"
    return None


def _is_claim_file(path: Path) -> bool:
    """Whether ``path`` is a regular YAML file with a top-level ``claims:`` (read no further than its first 64 KB)."""
    if path.suffix not in (".yaml", ".yml") or path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as file:
            head = file.read(65536)
    except OSError:
        return False
    return re.search(rb"^claims:", head, re.MULTILINE) is not None


def _mount_below(directory: Path) -> str | None:
    """A mount point strictly inside ``directory`` (a symbolic link is not followed), or None."""
    if not directory.is_dir():
        return None
    for parent, names, _ in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            if os.path.ismount(path):
                return path
    return None


def _move_together(staging: Path, directory: Path, names: list[str]) -> None:
    """Replace ``directory``'s report files and figures with ``staging``'s, with SIGINT and SIGTERM held.

    In one step where the system can: what this run does not write (``mutants.*``, a file of the author's) is
    linked into ``staging``, and the two directories are exchanged (:func:`_exchange`), so there is never a
    moment with part of one report and part of another. Where it cannot (not Linux, a file system without the
    exchange, or a report directory that is a mount point of its own, whose staging directory is inside it),
    ``figures/`` and then each file are replaced in turn, so that only a kill between two leaves them mixed.
    """
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        target = directory.resolve()
        if staging.resolve().parent != target:
            for entry in target.iterdir():
                if entry.name not in names and entry.name != "figures" and not entry.name.startswith(".staging-") \
                        and not (staging / entry.name).exists():
                    _link(entry, staging / entry.name)
            if _exchange(staging, target):
                return  # the old report is now at ``staging``, which the caller removes
        old_figures = target / f".figures-replaced-{os.getpid()}"
        if (target / "figures").exists():
            os.replace(target / "figures", old_figures)
        if (staging / "figures").exists():
            os.replace(staging / "figures", target / "figures")
        for name in names:
            os.replace(staging / name, target / name)
        shutil.rmtree(old_figures, ignore_errors=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _link(source: Path, destination: Path) -> None:
    """``source`` at ``destination`` too, without copying where a hard link can be made."""
    if source.is_symlink():
        os.symlink(os.readlink(source), destination)
    elif source.is_dir():
        shutil.copytree(source, destination, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(source, destination)


def _link_or_copy(source: str | Path, destination: str | Path) -> None:
    try:
        os.link(source, destination)
    except OSError:  # a file system without hard links, or a file this user may not link
        shutil.copy2(source, destination)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two directories in one atomic rename (Linux's ``renameat2`` with ``RENAME_EXCHANGE``, which Python's
    ``os`` does not offer, hence ctypes); False where the system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(second))


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
