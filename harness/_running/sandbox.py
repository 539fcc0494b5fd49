"""Where the implementation under test runs: a process apart, whose descendants die with it, that cannot write the
project.

The implementation's process is contained as far as the machine allows, and says how far
(:class:`Containment`), so the docs and the report can say which guarantee held:

- **a PID namespace** (Linux, as root or with unprivileged user namespaces): the implementation's host is
  process 1 of a namespace of its own. Every process it or its servers start, double-forked,
  ``setsid``-ed or not, is in that namespace, sees no process outside it, and is killed by the kernel
  when process 1 ends; the host also kills every stray at the end of each check.
- **a mount namespace**: the project (its claims, reports, cache, verifiers, the harness) and every
  directory of the judge's import path are bound read-only, and the observation cache is hidden under
  an empty file system, so the implementation cannot plant code or forge entries for a later run.
- **no capabilities**: after these mounts every capability is dropped (and ``no_new_privs`` set), so
  the implementation cannot remount, unmount or signal outside.

Where namespaces are refused (not Linux, or user namespaces off), the host is a subreaper in a session
of its own: descendants that outlive their parent come back to it and are killed at the end of each
check and run; one that the host's own death orphans is not (:attr:`Containment.descendants`).

Written with ``ctypes`` over libc: Python 3.11 has no ``os.unshare`` or ``mount``, and no library does this
for one process in a few calls.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
_CAPABILITY_VERSION_3 = 0x20080522


@dataclass(frozen=True)
class Containment:
    """What holds for the implementation's process, as the host found it: said in the docs' terms."""

    namespace: bool  # a PID namespace of its own: no descendant outlives the host
    readonly: bool  # the project and the judge's import path are read-only to it, the cache hidden
    capabilities_dropped: bool
    why_not: str = ""  # why a weaker containment was all the machine allowed

    @property
    def descendants(self) -> str:
        return ("killed by the kernel with the host (a PID namespace)" if self.namespace else
                "killed at the end of each check and run while the host lives (a subreaper); one orphaned by the "
                "host's own death survives")


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies, however it dies (Linux only)."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter(readonly: list[Path], hidden: list[Path]) -> Containment:
    """Contain this process (a fresh fork, about to import the implementation) and return what holds.

    With namespaces, this forks: the caller's process waits for the child, which is process 1 of the new PID
    namespace, and exits with its status; only the child returns from here. Without them, this process becomes a
    subreaper in a session of its own.
    """
    os.setsid()
    die_with_parent()
    libc = _libc()
    why = _unshare(libc)
    if why:
        _become_subreaper(libc)
        return Containment(False, False, False, why)
    pid = os.fork()
    if pid:  # the namespace's parent: it only waits, so that the judge's kill reaches the namespace through it
        _wait_and_exit(pid)
    die_with_parent()  # process 1 of the namespace: it dies with the waiting parent, and the namespace with it
    readonly_done = _mount_readonly(libc, readonly, hidden)
    dropped = _drop_capabilities(libc)
    return Containment(True, readonly_done == "", dropped, readonly_done)


def _unshare(libc: ctypes.CDLL | None) -> str:
    """Enter new mount and PID namespaces (and a user namespace where not root); why not, or ''."""
    if libc is None or not sys.platform.startswith("linux"):
        return "namespaces are Linux's"
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | CLONE_NEWPID | (0 if uid == 0 else CLONE_NEWUSER)
    if libc.unshare(flags) != 0:
        return f"unshare refused ({os.strerror(ctypes.get_errno())}): user namespaces are off, or the process " \
               "lacks the privilege"
    if uid != 0:
        try:
            Path("/proc/self/setgroups").write_text("deny", encoding="ascii")
            Path("/proc/self/uid_map").write_text(f"0 {uid} 1", encoding="ascii")
            Path("/proc/self/gid_map").write_text(f"0 {gid} 1", encoding="ascii")
        except OSError as error:
            return f"the user namespace could not be mapped ({error})"
    return ""


def _wait_and_exit(pid: int) -> None:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue


def _mount_readonly(libc: ctypes.CDLL, readonly: list[Path], hidden: list[Path]) -> str:
    """Bind each of ``readonly`` read-only, an empty file system over each of ``hidden``, and a /proc of the namespace;
    '' when all of it held, else what did not."""
    failures = []
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"mounts could not be made private ({os.strerror(ctypes.get_errno())})"
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV, None) != 0:
        failures.append(f"/proc of the namespace ({os.strerror(ctypes.get_errno())})")
    for path in _outermost(readonly):
        target = os.fsencode(str(path))
        if libc.mount(target, target, None, MS_BIND | MS_REC, None) != 0 or libc.mount(
                None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, None) != 0:
            failures.append(f"{path} read-only ({os.strerror(ctypes.get_errno())})")
    for path in hidden:
        if path.is_dir() and libc.mount(b"tmpfs", os.fsencode(str(path)), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                                        b"size=4k") != 0:
            failures.append(f"{path} hidden ({os.strerror(ctypes.get_errno())})")
    return "; ".join(failures)


def _outermost(paths: list[Path]) -> list[Path]:
    """The existing directories of ``paths`` that lie in none of the others (a bind covers what is below it)."""
    found = sorted({path.resolve() for path in paths if path.is_dir()}, key=lambda path: len(path.parts))
    kept: list[Path] = []
    for path in found:
        if not any(path == outer or outer in path.parents for outer in kept) and path != Path("/"):
            kept.append(path)
    return kept


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc: ctypes.CDLL) -> bool:
    """Drop every capability of this process (and forbid regaining any): it can no longer remount or unmount."""
    with contextlib.suppress(AttributeError):
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    try:
        return libc.capset(ctypes.byref(header), data) == 0
    except AttributeError:
        return False


def _become_subreaper(libc: ctypes.CDLL | None) -> None:
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def kill_strays(keep: set[int]) -> int:
    """Kill every process of this namespace (or every child of this subreaper) but this one and ``keep``: what the
    implementation started and left behind. Returns how many were killed."""
    me, killed = os.getpid(), 0
    for pid in _others():
        if pid not in keep and pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:  # reap them, and any child that ended
            pass
    return killed


def _others() -> list[int]:
    """The processes this one may have to kill: in a PID namespace, every one it sees (its /proc is the namespace's);
    otherwise its own children (a subreaper's orphans come back to it)."""
    if os.getpid() == 1:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    try:
        children = Path(f"/proc/self/task/{os.getpid()}/children").read_text(encoding="ascii").split()
        return [int(pid) for pid in children]
    except OSError:
        return []
