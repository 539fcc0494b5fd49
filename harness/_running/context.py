"""What a verifier receives: the implementation under test, its parameters, randomness, profile."""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

import claims_harness.stats as stats
from claims_harness.errors import ClaimsError, ImplementationError, VerifierError

# The most samples a Monte Carlo check may draw. A verifier holds several float64 values a sample
# (a group of answers, a gradient per logit), so at 2**24 samples it already holds a few GiB; the
# checks of the course need at most 0.71 million (reinforce-unbiased-for-chosen-objective). A
# deviation that needs more is a typo, and is refused before a byte is allocated.
MAX_SAMPLES = 2**24


class SeedMapper(Protocol):
    """Where an experiment's seeds run (``claims_harness._running.executor.SeedRunner``), as the context sees it."""

    def map(self, function: Callable[..., Any], seeds: Sequence[int], args: tuple[Any, ...]) -> list[Any]: ...


class ImplementationView:
    """The implementation under test, narrowed to the functions a verifier declared in ``uses``.

    ``module`` is the implementation in its own process (:class:`~claims_harness._running.remote.RemoteImplementation`):
    every call crosses there as data and its result comes back as data, so the verifier computes where the
    implementation was never imported. Declaring what is used lets the harness report which implementation
    functions each claim exercised, and tell a student which function their module lacks before anything runs.
    While a property runs (:func:`record_calls`), the functions it hands out record their calls, so that a
    failing example is reported as calls to the student's functions. With ``inputs_guarded`` (every kind of
    check but experiments, whose loops are the implementation's own), a function that changes an array it was
    given is an ``ImplementationError`` (the implementation's process compares its arguments before and after).
    """

    def __init__(self, module: Any, uses: Sequence[str], verifier: str, claim_id: str,
                 inputs_guarded: bool = False):
        self._module = module
        self._uses = tuple(uses)
        self._verifier = verifier
        self._claim_id = claim_id
        self._inputs_guarded = inputs_guarded
        self._record: CallRecord | None = None  # set only while a property runs (record_calls)

    @property
    def name(self) -> str:
        return self._module.__name__

    def _described(self) -> dict[str, dict[str, Any]]:
        return self._module.describe(list(self._uses)) if self._uses else {}

    def missing(self) -> list[str]:
        return [name for name, found in self._described().items() if not found["exists"]]

    def unimplemented(self) -> list[str]:
        """The declared functions that are still stubs (``claims_harness._running.implementation.is_stub``)."""
        return [name for name, found in self._described().items() if found["exists"] and found["stub"]]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._uses:
            raise VerifierError(f"verifier '{self._verifier}' calls impl.{name} without declaring it; "
                                f"add '{name}' to uses= in its @verifier(...) decorator")
        found = self._module.describe([name])[name]
        if not found["exists"]:
            raise ImplementationError(f"implementation '{self.name}' has no function '{name}' "
                                      f"(needed by claim '{self._claim_id}')")
        function = self._module.function(name)
        function.guarded = self._inputs_guarded and not found["is_class"]
        if self._record is None:
            return function
        return _RecordedFunction(name, function, self._record)

    def loss_gradient(self, name: str, args: Sequence[Any], wrt: int, step: float, held: Sequence[int] = (),
                      tied: Sequence[int] = ()) -> tuple[np.ndarray, dict[int, float]]:
        """The gradient of the loss ``name(*args)`` with respect to ``args[wrt]``, taken in the implementation's
        process, and the largest |gradient| that reached each argument in ``held`` (the loss's constants), by
        position.

        For a PyTorch function, by autograd on its own graph, with ``held`` handed in requiring grad and ``tied``
        handed in as the very tensor ``args[wrt]`` (``claims_harness._running.frameworks.torch_gradient``). For NumPy
        code, by central differences with ``step`` (the verifier's bound says which); ``tied`` arguments keep their
        values, as constants do. Only arrays cross: the gradient and what leaked.
        """
        getattr(self, name)  # declared, and there
        call = Call(name, self._module.function(name), _copied(tuple(args)), {}) if self._record is not None \
            else None
        if call is not None and len(self._record.calls) < self._record.limit:
            self._record.calls.append(call)
        try:
            gradient, leaked = self._module.request("gradient", name, tuple(args), wrt, step, tuple(held), tuple(tied))
        except BaseException as error:
            if call is not None:
                call.raised = error
            raise
        if call is not None:
            call.returned = _copied(gradient)
        return np.asarray(gradient, dtype=float), {int(index): float(value) for index, value in leaked.items()}

    def __deepcopy__(self, memo: dict[int, Any]) -> ImplementationView:
        # A verifier hands the view itself to a training loop (``ops=ctx.impl``): a recorded call's copy is the view.
        return self

    def __reduce__(self) -> Any:
        raise VerifierError(f"verifier '{self._verifier}' sends ctx.impl to another process; give ctx.map_seeds a "
                            "function and use the run.impl it receives, which reaches the implementation there")


@dataclass
class Call:
    """One call a verifier made to the implementation: what it passed (copies), and what came back."""

    function: str
    target: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    returned: Any = None
    raised: BaseException | None = None


@dataclass
class CallRecord:
    """The calls a verifier makes to the implementation during one example of a property.

    A failing property is reported with the calls of its falsifying example, so a student sees their
    function's inputs and output rather than the verifier's variables. Only the first ``limit``
    calls of an example are kept (a verifier may call a function in a loop); the rest are counted.
    """

    module: Any
    limit: int
    calls: list[Call] = field(default_factory=list)
    left_out: int = 0
    active: bool = True

    def start_example(self) -> None:
        self.calls.clear()
        self.left_out = 0


@contextlib.contextmanager
def record_calls(view: ImplementationView, limit: int) -> Iterator[CallRecord]:
    """Record the calls made through ``view`` inside the block (``claims_harness._running.property.check_property``).

    Outside such a block the view hands out the implementation's functions themselves, so the
    checks that are not properties pay nothing.
    """
    previous, record = view._record, CallRecord(view._module, limit)
    view._record = record
    try:
        yield record
    finally:
        record.active = False
        view._record = previous


class _RecordedFunction:
    """A function of the implementation that records its calls; what it returns or raises is the function's."""

    def __init__(self, name: str, function: Callable[..., Any], record: CallRecord):
        functools.update_wrapper(self, function, assigned=("__module__", "__name__", "__qualname__"), updated=())
        self.__wrapped__ = function
        self._name = name
        self._record = record

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function, record = self.__wrapped__, self._record
        if not record.active or len(record.calls) >= record.limit:  # kept past its property, or too many kept
            if record.active:
                record.left_out += 1
            return function(*args, **kwargs)
        call = Call(self._name, function, _copied(args), _copied(kwargs))
        record.calls.append(call)
        try:
            returned = function(*args, **kwargs)
        except BaseException as error:
            call.raised = error
            raise
        call.returned = _copied(returned)
        return returned


def _copied(value: Any) -> Any:
    """A deep copy of ``value``, or ``value`` itself when it cannot be copied (a generator, say)."""
    try:
        return copy.deepcopy(value)
    except ClaimsError:  # the check's timeout, raised while copying
        raise
    except Exception:
        return value


@dataclass(frozen=True)
class Context:
    """Everything a verifier may use; verifiers never import the implementation themselves.

    Attributes:
      impl: the implementation under test, narrowed to the verifier's declared functions.
      params: the check's parameters, validated by the verifier's params model.
      rng: a generator seeded from the claim id, the check's position and the global seed.
      seed: the integer that seeded ``rng``, for reproducing the check.
      profile: 'smoke' (fast, for every run) or 'full' (for releases).
      alpha: the false-failure rate allotted to each statistical comparison of the check.
      beta: the false-pass rate at ``deviation``.
      deviation: the smallest error of a mean a Monte Carlo check must detect, when stated.
      figures_dir: where :meth:`save_figure` writes; ``figures/`` of the report directory when
        a report is being written.
      seed_runner: where :meth:`map_seeds` runs the seeds (this process, a local pool, Dask).
      shift: added to every sample :meth:`mean_estimate` sees; zero except when ``claims audit``
        measures power by moving each estimated mean by the check's deviation.
      shrink: a failing property is shrunk to its smallest input whatever the profile
        (``--claims-shrink``; the full profile always shrinks).
    """

    impl: ImplementationView
    params: BaseModel
    rng: np.random.Generator
    seed: int
    profile: str
    alpha: float
    beta: float
    deviation: float | None
    figures_dir: Path
    seed_runner: SeedMapper
    shift: float = 0.0
    shrink: bool = False

    def map_seeds(self, function: Callable[..., Any], seeds: Sequence[int], *args: Any) -> list[Any]:
        """``[function(run, *args) for each seed]``, the seeds run as independent tasks, maybe in parallel.

        ``run`` is a :class:`claims_harness.SeedRun`: ``run.impl`` (the implementation, imported where the
        seed runs) and ``run.seed``. Tasks go to a local process pool or to
        Dask workers, so ``function`` must be defined at the top level of an importable module
        and ``args`` and the results must pickle; each seed's result must depend only on the seed
        and ``args`` (not on ``ctx.rng``), which makes it the same whichever executor ran it.
        """
        return self.seed_runner.map(function, seeds, args)

    def samples_needed(self, support: tuple[float, float]) -> int:
        """How many independent samples detect ``deviation`` at this check's alpha and beta.

        Raises:
          ClaimsError: when that is more than :data:`MAX_SAMPLES`, before anything is drawn.
        """
        if self.deviation is None:
            raise VerifierError("samples_needed() needs the check's 'deviation'; state it in the claim file")
        try:
            return stats.min_samples(self.alpha, self.beta, self.deviation, support[1] - support[0], MAX_SAMPLES)
        except stats.SampleSizeError as error:
            raise ClaimsError(f"the check's 'deviation' is too small to test: {error} (this check's alpha is "
                              "split evenly over its comparisons)") from None

    def mean_estimate(self, samples: Any, support: tuple[float, float], method: str = "hoeffding"
                      ) -> stats.MeanEstimate:
        """A confidence interval for the mean of ``samples`` at this check's alpha.

        A sample outside ``support`` is the implementation's fault when the verifier calls one (the support is the
        range every sample has when its functions are right), and the error says so to whoever runs it; a verifier
        that calls none has a support or a sampler to fix, and its error says that to the claim's author.
        """
        if self.shift:
            samples = np.asarray(samples, dtype=float) + self.shift
            support = (support[0] + self.shift, support[1] + self.shift)
        try:
            return stats.mean_estimate(samples, support, self.alpha, self.beta, method)
        except stats.SupportViolation as error:
            uses = getattr(self.impl, "_uses", ())
            if not uses:
                raise
            raise ImplementationError(
                f"{error.args[0].split('; the confidence interval')[0]}: every sample lies in that range when "
                f"{', '.join(uses)} {'is' if len(uses) == 1 else 'are'} right, so what the implementation returned "
                "is out of it (a wrong score, advantage or probability gives such values); check it against its "
                "docstring") from None

    def save_figure(self, figure: Any, name: str) -> str:
        """Save a matplotlib figure as ``<name>.svg``, byte-for-byte reproducible; return its path.

        The path is relative to the report directory (``figures/<name>.svg``) so the report can
        link it; record it among the verifier's observations.
        """
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        path = self.figures_dir / f"{name}.svg"
        if hasattr(figure, "svg"):  # the implementation's figure, drawn in its process (``RemoteObject.svg``)
            drawn = figure.svg()
            if not isinstance(drawn, bytes) or not drawn.lstrip().startswith((b"<?xml", b"<svg")):
                raise ImplementationError(f"the figure the implementation returned is no SVG drawing ({drawn!r:.80})")
            path.write_bytes(drawn)
            return f"{self.figures_dir.name}/{path.name}"
        import matplotlib

        # A fixed hash salt and no date keep the SVG identical for identical data.
        with matplotlib.rc_context({"svg.hashsalt": "claims", "svg.fonttype": "none"}):
            figure.savefig(path, format="svg", metadata={"Date": None})
        return f"{self.figures_dir.name}/{path.name}"
