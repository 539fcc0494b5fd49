"""Where a check's work runs: its time limit, and the seeds of an experiment as independent tasks.

An experiment check runs one training run per seed. :meth:`SeedRunner.map` hands each seed to a
``concurrent.futures`` executor: in the checking process itself, a local process pool, or the
workers of a Dask distributed scheduler. A seed's task carries only names and plain data (the
per-seed function by its module path, the implementation by its module name and the functions
the verifier declared); where it runs, it reaches the implementation through a server of its own
(``claims_harness._running.remote.implementation_here``: the check's own in the check's worker, else one
of a host that process starts), so every executor computes the same numbers from the same seed.
The executor is never part of the cache key for that reason.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any

from claims_harness._claims.course import find_course
from claims_harness._claims.formats import library_versions
from claims_harness._running.context import ImplementationView
from claims_harness._running.processes import in_worker
from claims_harness._running.remote import implementation_here
from claims_harness.errors import CheckTimeout, ClaimsError, VerifierError


@contextlib.contextmanager
def time_limit(seconds: float, stated: float | None = None) -> Iterator[None]:
    """Raise :class:`CheckTimeout` after ``seconds`` (main thread, POSIX only; elsewhere no limit).

    ``stated`` is the check's whole limit, for the message, when ``seconds`` is what is left of it.
    """
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    limit = stated if stated is not None else seconds

    def expire(signum: int, frame: Any) -> None:
        raise CheckTimeout(f"the check ran past its time limit of {limit:g} s; make it faster, or state a "
                           "larger 'timeout' in the claim file if the work is really needed")

    if seconds <= 0:
        expire(signal.SIGALRM, None)
    previous = signal.signal(signal.SIGALRM, expire)
    # Past the limit the alarm repeats every second: code that catches the first one (Hypothesis replays a
    # failing example; an implementation may swallow it) meets the next. The supervisor's kill is the backstop.
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_workers(checking_processes: int, asked: int | None = None) -> int:
    """Processes per checking process for experiment seeds: ``asked`` (``--claims-workers``), else
    ``$CLAIMS_WORKERS``, else the cores left to it by the other checking processes (``claims verify``'s
    lanes, pytest-xdist's workers).

    With a checking process on every core already (``-n 2`` on 2 cores) this is 1, i.e. the seeds run in the
    checking process: a pool per checking process would add processes but no core (docs/performance.md).
    """
    return (asked or int(os.environ.get("CLAIMS_WORKERS", "0"))
            or max(1, available_cores() // max(1, checking_processes)))


class SeedRun:
    """What the per-seed function given to ``ctx.map_seeds`` receives.

    Attributes:
      impl: the implementation under test, narrowed to the verifier's declared functions, reached from
        the process that runs this seed (it runs in a process of its own).
      seed: this run's seed.
    """

    def __init__(self, impl: ImplementationView, seed: int):
        self.impl = impl
        self.seed = seed


@dataclass(frozen=True)
class SeedTask:
    """One seed of one check, as sent to a worker: names and plain data only.

    ``payload`` is the per-seed function and its arguments, pickled by the checking process and
    unpickled by :func:`run_seed`, after it has taken ``sys_path``: a worker that cannot import
    them then reports an error instead of dying while it receives the task.
    """

    payload: bytes
    seed: int
    impl: str
    uses: tuple[str, ...]
    verifier: str
    claim_id: str
    deadline: float | None
    time_limit: float | None
    directory: str
    sys_path: tuple[str, ...] | None = None


def run_seed(task: SeedTask) -> Any:
    """Run one seed where this is called (in the checking process or a worker), within what is left of the time."""
    if task.sys_path is not None and list(task.sys_path) != sys.path:
        sys.path[:] = task.sys_path
        importlib.invalidate_caches()
    try:
        function, args = pickle.loads(task.payload)
    except (ImportError, AttributeError) as error:
        raise ClaimsError(f"the worker running seed {task.seed} cannot import what it runs ({error}); the "
                          f"verifiers and the implementation '{task.impl}' must be installed where the workers run "
                          "(docs/performance.md)") from None
    try:
        reached = implementation_here(task.impl, task.directory)
    except ClaimsError as error:
        raise ClaimsError(f"the worker running seed {task.seed} cannot reach the implementation '{task.impl}' "
                          f"({error})") from None
    view = ImplementationView(reached, task.uses, task.verifier, task.claim_id)
    limit = (time_limit(task.deadline - time.time(), task.time_limit) if task.deadline is not None
             else contextlib.nullcontext())
    with limit:
        return function(SeedRun(view, task.seed), *args)


@dataclass(frozen=True)
class SeedRunner:
    """How one check's seeds run: on which executor, against which implementation, until when.

    Attributes:
      scheduler: a Dask scheduler's address (``tcp://host:8786``), or None for this machine.
      workers: processes of the local pool (1: in the checking process, one seed after the other).
      deadline: ``time.time()`` at which the check's time limit expires.
    """

    impl: str
    directory: str
    uses: tuple[str, ...]
    verifier: str
    claim_id: str
    scheduler: str | None = None
    workers: int = 1
    deadline: float | None = None
    time_limit: float | None = None

    def map(self, function: Callable[..., Any], seeds: Sequence[int], args: tuple[Any, ...]) -> list[Any]:
        """``function(run, *args)`` for each seed, in the order of ``seeds``; see ``Context.map_seeds``."""
        payload = _payload(function, args, self.verifier)
        tasks = [SeedTask(payload, int(seed), self.impl, self.uses, self.verifier, self.claim_id, self.deadline,
                          self.time_limit, self.directory) for seed in seeds]
        size = min(self.workers, len(tasks))
        executor = _executor(self.scheduler, size)
        if executor is None:
            # The check's own time limit is running in this process already.
            return [run_seed(replace(task, deadline=None)) for task in tasks]
        if not self.scheduler:
            # A pool worker imports as this process does, even after sys.path changed (pytester, --impl paths).
            tasks = [replace(task, sys_path=tuple(sys.path)) for task in tasks]
        futures = [executor.submit(run_seed, task) for task in tasks]
        try:
            return [_result(future, task, self.scheduler) for future, task in zip(futures, tasks, strict=True)]
        except BrokenProcessPool:
            _EXECUTORS.pop(("pool", size), None)
            raise ClaimsError(f"a process of the local pool died running a seed of claim '{self.claim_id}' "
                              "(killed, out of memory, or os._exit in the implementation); rerun with "
                              "--claims-workers 1 to run the seeds in the checking process and see why") from None
        finally:
            # After a failure or the time limit nothing more of this check runs; a Dask executor is made
            # per check, and shutting it down cancels its tasks on the cluster too.
            for future in futures:
                future.cancel()
            if self.scheduler:
                executor.shutdown(wait=False)


def _payload(function: Callable[..., Any], args: tuple[Any, ...], verifier: str) -> bytes:
    """The function and arguments pickled, on every executor alike, so what works in process works on a cluster."""
    problem = None
    if getattr(function, "__module__", "__main__") == "__main__":
        problem = "it is defined in __main__, which workers do not have"
    else:
        try:
            return pickle.dumps((function, args))
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            problem = str(error)
    raise VerifierError(f"verifier '{verifier}' gives ctx.map_seeds {getattr(function, '__qualname__', function)!r} "
                        f"and its arguments, which cannot be sent to workers ({problem}); the function must be "
                        "defined at the top level of an importable module, and the arguments must pickle")


def _result(future: Future, task: SeedTask, scheduler: str | None) -> Any:
    try:
        return future.result()
    except (ClaimsError, BrokenProcessPool):
        raise
    except Exception as error:
        error.add_note(f"(in seed {task.seed} of claim '{task.claim_id}', run on "
                       f"{'the Dask scheduler ' + scheduler if scheduler else 'the local process pool'})")
        raise


# One executor per kind and size, kept for the whole pytest session: starting one costs more than a seed.
_EXECUTORS: dict[tuple[str, Any], Any] = {}
# A fork (a check's worker) has copies of its parent's executors without the threads that run them: it starts its own.
os.register_at_fork(after_in_child=_EXECUTORS.clear)


def _executor(scheduler: str | None, workers: int) -> Executor | None:
    if scheduler:
        if ("dask", scheduler) not in _EXECUTORS:
            _EXECUTORS[("dask", scheduler)] = _dask_client(scheduler)
        return _EXECUTORS[("dask", scheduler)].get_executor(pure=False)
    if workers <= 1:
        return None
    if ("pool", workers) not in _EXECUTORS:
        _EXECUTORS[("pool", workers)] = ProcessPoolExecutor(workers, mp_context=_pool_context())
    return _EXECUTORS[("pool", workers)]


def _pool_context() -> multiprocessing.context.BaseContext:
    """In a check's worker (``claims_harness._running.isolation``), plain forks of it. Elsewhere (``--pdb``), workers
    forked from a server that imported the verifiers once, not from the pytest process, whose threads
    (xdist's, Dask's) make forking it unsafe. Each reaches the implementation through a host of its own (it is
    never imported here).
    """
    if in_worker():
        # A check's worker is a fork with one thread and everything imported: its forks start in milliseconds.
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["numpy", find_course().verifiers])
    return context


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise ClaimsError(f"--claims-scheduler {address} needs Dask: pip install dask distributed "
                          "(both are in the project's 'test' extra)") from None
    try:
        client = Client(address, timeout="10s", set_as_default=False)
    except OSError as error:
        raise ClaimsError(f"cannot reach the Dask scheduler at {address}: {error}; start one with 'dask scheduler' "
                          "and workers with 'dask worker <address>' (docs/performance.md), or drop "
                          "--claims-scheduler") from None
    try:
        require_same_numerics(address, client.run(library_versions))
    except ClaimsError:
        client.close()
        raise
    return client


def require_same_numerics(address: str, workers: dict[str, dict[str, str]]) -> None:
    """Refuse a cluster whose workers would compute other numbers than this machine (and than the cache holds)."""
    if not workers:
        raise ClaimsError(f"the Dask scheduler at {address} has no workers; start some with 'dask worker {address}'")
    ours = library_versions()
    for worker, theirs in sorted(workers.items()):
        if theirs != ours:
            differences = ", ".join(f"{name} {theirs.get(name)} there, {version} here" for name, version in
                                    ours.items() if theirs.get(name) != version)
            raise ClaimsError(f"Dask worker {worker} has other versions than this run ({differences}); results "
                              "would depend on where a seed ran: install the same versions on the workers")


def shutdown_executors() -> None:
    """Stop the pools and close the Dask clients this process started."""
    while _EXECUTORS:
        _, executor = _EXECUTORS.popitem()
        if isinstance(executor, ProcessPoolExecutor):
            executor.shutdown(wait=False, cancel_futures=True)
        else:
            executor.close()
