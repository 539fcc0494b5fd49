"""What a verifier receives: the implementation under test, its parameters, randomness, profile."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

import harness.stats as stats
from harness._claims.errors import ClaimsError, ImplementationError, Unsupported, VerifierError
from harness._running.frameworks import call_implementation, library_of, torch_gradient
from harness._running.implementation import is_stub

PROFILES = ("smoke", "full")
# The most samples a Monte Carlo check may draw. A verifier holds several float64 values a sample
# (a group of answers, a gradient per logit), so at 2**24 samples it already holds a few GiB; the
# checks of the course need at most 0.71 million (reinforce-unbiased-for-chosen-objective). A
# deviation that needs more is a typo, and is refused before a byte is allocated.
MAX_SAMPLES = 2**24


class SeedMapper(Protocol):
    """Where an experiment's seeds run (``harness._running.executor.SeedRunner``), as the context sees it."""

    def map(self, function: Callable[..., Any], seeds: Sequence[int], args: tuple[Any, ...]) -> list[Any]: ...


class ImplementationView:
    """The implementation under test, narrowed to the functions a verifier declared in ``uses``.

    Declaring what is used lets the harness report which implementation functions each claim
    exercised, and tell a student which function their module lacks before anything runs. While a
    property runs (:func:`record_calls`), the functions it hands out record their calls, so that a
    failing example is reported as calls to the student's functions. Whatever a function returns
    reaches the verifier as NumPy's and Python's own types (:func:`plain`): a subclass that
    redefines subtraction or comparison cannot make a wrong result compare equal. With
    ``inputs_guarded`` (every kind of check but experiments, whose loops are the implementation's
    own), a function that changes an array it was given is an ``ImplementationError``: a verifier
    computes what it expects from the same arrays after the call.
    """

    def __init__(self, module: ModuleType, uses: Sequence[str], verifier: str, claim_id: str,
                 inputs_guarded: bool = False):
        self._module = module
        self._uses = tuple(uses)
        self._verifier = verifier
        self._claim_id = claim_id
        self._inputs_guarded = inputs_guarded
        self._record: CallRecord | None = None  # set only while a property runs (record_calls)
        self._plain_functions: dict[str, _PlainResults] = {}

    @property
    def name(self) -> str:
        return self._module.__name__

    def missing(self) -> list[str]:
        return [name for name in self._uses if not callable(getattr(self._module, name, None))]

    def unimplemented(self) -> list[str]:
        """The declared functions that are still stubs (``harness._running.implementation.is_stub``)."""
        return [name for name in self._uses if is_stub(getattr(self._module, name, None))]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._record is None and name in self._plain_functions:  # a training loop asks at every step
            return self._plain_functions[name]
        if name not in self._uses:
            raise VerifierError(f"verifier '{self._verifier}' calls impl.{name} without declaring it; "
                                f"add '{name}' to uses= in its @verifier(...) decorator")
        function = getattr(self._module, name, None)
        if not callable(function):
            raise ImplementationError(f"implementation '{self.name}' has no function '{name}' "
                                      f"(needed by claim '{self._claim_id}')")
        # A class is returned as it is: a wrapper would break isinstance() against it.
        if isinstance(function, type):
            return function
        guard = _InputGuard(self.name, name) if self._inputs_guarded else None
        if self._record is None:
            self._plain_functions[name] = _PlainResults(name, function, guard)
            return self._plain_functions[name]
        return _RecordedFunction(name, function, self._record, guard)

    def loss_gradient(self, name: str, args: Sequence[Any], wrt: int, step: float, held: Sequence[int] = (),
                      tied: Sequence[int] = ()) -> tuple[np.ndarray, dict[int, float]]:
        """The gradient of the loss ``name(*args)`` with respect to ``args[wrt]``, taken by the harness, and the
        largest |gradient| that reached each argument in ``held`` (the loss's constants), by position.

        For a PyTorch function, by autograd on its own graph, with ``held`` handed in requiring grad and ``tied``
        handed in as the very tensor ``args[wrt]`` (``harness._running.frameworks.torch_gradient``). For NumPy
        code, by central differences with ``step`` (the verifier's bound says which), each evaluation a recorded
        call; nothing can leak, and ``tied`` arguments keep their values, as constants do.
        """
        function = getattr(self, name)
        raw = getattr(function, "__wrapped__", function)
        if library_of(raw) == "torch":
            return torch_gradient(raw, name, args, wrt, held, tied)
        x = np.asarray(args[wrt], dtype=float)
        gradient = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            shift = np.zeros(x.shape)
            shift[index] = step
            values = [float(np.asarray(function(*args[:wrt], moved, *args[wrt + 1:])).reshape(()))
                      for moved in (x + shift, x - shift)]
            gradient[index] = (values[0] - values[1]) / (2 * step)
        return gradient, {}

    def __deepcopy__(self, memo: dict[int, Any]) -> ImplementationView:
        # A verifier hands the view itself to a training loop (``ops=ctx.impl``): a recorded call's copy is the view.
        return self

    def __reduce__(self) -> Any:
        raise VerifierError(f"verifier '{self._verifier}' sends ctx.impl to another process; give ctx.map_seeds a "
                            "function and use the run.impl it receives, imported where the seed runs")


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

    module: ModuleType
    limit: int
    calls: list[Call] = field(default_factory=list)
    left_out: int = 0
    active: bool = True

    def start_example(self) -> None:
        self.calls.clear()
        self.left_out = 0


@contextlib.contextmanager
def record_calls(view: ImplementationView, limit: int) -> Iterator[CallRecord]:
    """Record the calls made through ``view`` inside the block (``harness._running.property.check_property``).

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

    def __init__(self, name: str, function: Callable[..., Any], record: CallRecord, guard: _InputGuard | None):
        functools.update_wrapper(self, function)
        self._name = name
        self._record = record
        self._guard = guard

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function, record = self.__wrapped__, self._record
        if not record.active:  # kept by the verifier past the end of its property
            return _called(self._name, function, self._guard, args, kwargs)
        if len(record.calls) >= record.limit:
            record.left_out += 1
            return _called(self._name, function, self._guard, args, kwargs)
        # Copied before the call: an implementation may change its inputs in place.
        call = Call(self._name, function, _copied(args), _copied(kwargs))
        record.calls.append(call)
        try:
            returned = _called(self._name, function, self._guard, args, kwargs)
        except BaseException as error:
            call.raised = error
            raise
        call.returned = _copied(returned)
        return returned

    def __reduce__(self) -> Any:
        # Pickled as the function itself, so that recording changes nothing about what may be sent elsewhere.
        return _identity, (self.__wrapped__,)


def _identity(value: Any) -> Any:
    return value


class _PlainResults:
    """A function of the implementation whose results reach the verifier as :func:`plain` values."""

    def __init__(self, name: str, function: Callable[..., Any], guard: _InputGuard | None):
        functools.update_wrapper(self, function)
        self._name = name
        self._guard = guard

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _called(self._name, self.__wrapped__, self._guard, args, kwargs)

    def __reduce__(self) -> Any:
        return _PlainResults, (self._name, self.__wrapped__, self._guard)


def _called(contract_name: str, function: Callable[..., Any], guard: _InputGuard | None, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
    """``plain(function(*args, **kwargs))``, refused if ``guard`` finds an argument changed by the call.

    A refusal names the contract function in its ``function`` attribute: the error is that function's alone, and the
    report's scoreboard blames it, not every function the check uses.
    """
    try:
        return _plain_call(function, guard, args, kwargs)
    except ImplementationError as error:
        if getattr(error, "function", None) is None:
            error.function = contract_name
        raise


def _plain_call(function: Callable[..., Any], guard: _InputGuard | None, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', None) or repr(function)}"
    _refuse_declined(function, name, kwargs)
    before = guard.snapshot(function, args, kwargs) if guard is not None else None
    returned = call_implementation(function, name, args, kwargs)
    try:
        result = plain(returned)
    except NotPlainData as error:
        raise ImplementationError(
            f"{name} returned {error}, not plain data: a contract function "
            "returns NumPy arrays of numbers, Python or NumPy numbers, Fractions, strings, or tuples, lists, "
            "dicts and dataclasses of them (docs/implementation-contract.md)") from None
    if guard is not None:
        guard.verify(function, before, args, kwargs)
    return result


@dataclass(frozen=True)
class _InputGuard:
    """Finds the arguments a call changed: an array's contents or shape, anything rebound or added inside a
    tuple, list, dict or dataclass (a dict entry or a field set to a new array counts), to any depth."""

    implementation: str
    function: str

    def snapshot(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> dict[str, tuple[Any, Any]]:
        """Each argument by name, with its state before the call."""
        return {name: (value, _state(value, set())) for name, value in _bound(function, args, kwargs).items()}

    def verify(self, function: Callable[..., Any], before: dict[str, tuple[Any, Any]], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        for name, (value, state) in before.items():
            if _state(value, set()) != state:
                raise ImplementationError(
                    f"implementation '{self.implementation}': {self.function} changed its argument {name} in "
                    "place. The verifiers compute what they expect from the values they passed, so every function "
                    "must leave its inputs as they were, arrays, dict entries and fields alike "
                    "(docs/implementation-contract.md): compute on a copy, e.g. np.array(x, dtype=float)")


def _bound(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments by their parameters' names, quoted (by position, ``[0]``, when the signature cannot bind)."""
    try:
        bound = _signature(function).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {f"[{index}]": value for index, value in enumerate(args)} | kwargs
    return {repr(name) if not name.startswith("[") else name: value for name, value in bound.items()}


def _refuse_declined(function: Callable[..., Any], name: str, kwargs: dict[str, Any]) -> None:
    """Raise :class:`Unsupported` when ``function`` takes none of some keyword of the call: verifiers pass only the
    contract's optional features by keyword (``carry=``, ``normalize=``), and an implementation may leave them out."""
    if not kwargs:
        return
    try:
        parameters = _signature(function).parameters
    except (TypeError, ValueError):  # no signature (a builtin): the call itself will say
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    declined = [keyword for keyword in kwargs if keyword not in parameters
                or parameters[keyword].kind is inspect.Parameter.POSITIONAL_ONLY]
    if declined:
        raise Unsupported(f"unsupported call: {name} takes no {', '.join(f'{k}=' for k in declined)} (an optional "
                          "feature of the contract, docs/implementation-contract.md); what needs it is not checked")


@functools.lru_cache(maxsize=1024)
def _signature(function: Callable[..., Any]) -> inspect.Signature:
    """``inspect.signature``, once per function: a property calls one function thousands of times."""
    return inspect.signature(function)


def _state(value: Any, seen: set[int]) -> Any:
    """What a call must leave as it was of ``value``: each array's contents, and the identity and order of
    everything a container, a dict or a dataclass holds, to any depth (a cycle is followed once)."""
    if isinstance(value, np.ndarray):
        return ("array", id(value), value.shape, value.dtype.str, value.tobytes())
    if id(value) in seen:
        return ("seen", id(value))
    if isinstance(value, (tuple, list)):
        seen.add(id(value))
        return (type(value), id(value), tuple(_state(item, seen) for item in value))
    if isinstance(value, dict):
        seen.add(id(value))
        return (dict, id(value), tuple((key, _state(item, seen)) for key, item in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        seen.add(id(value))
        return (type(value), id(value), tuple((name, _state(getattr(value, name), seen))
                                              for name in (field.name for field in dataclasses.fields(value))))
    return (type(value), id(value))


# Scalar types whose arithmetic and comparisons are NumPy's or Python's own; the numbers among them.
_NUMBERS = frozenset({float, int, bool, complex, Fraction, *(np.dtype(code).type for code in "?bhilqBHILQefdgFDG")})
_PLAIN_SCALARS = _NUMBERS | {str, bytes, type(None)}


def plain(value: Any) -> Any:
    """``value`` with every subclass of an array, a number or a Fraction in it replaced by the base type.

    A verifier compares what the implementation returned with arithmetic and comparisons
    (``np.abs(advantages - expected) <= bound``). An ndarray subclass, or a float or Fraction
    subclass, can redefine those to make any result pass, so the value the implementation
    reported is taken out of it: an array is viewed as a plain ndarray (no copy), a number is
    converted, and an object array's elements, tuples (named ones kept), lists, dicts and
    dataclass fields are converted in turn. A value of any other type that defines arithmetic,
    comparisons, conversions to numbers or arrays, or iteration (``_DATA_PROTOCOL``) only pretends
    to be data, and so does an object array of anything but numbers and sequences of them: both
    raise ``NotPlainData``. Anything else (an environment, a figure), and a value that is already
    plain, is returned as it is, so a correct implementation's results are the same objects. How a
    type is converted is worked out once per type: a training loop's results pass here at every step.
    """
    kind = type(value)
    if kind is np.ndarray:
        return value if value.dtype.kind != "O" else _plain_objects(value)
    if kind in _PLAIN_SCALARS:
        return value
    convert = _CONVERTERS.get(kind)
    if convert is None:
        convert = _CONVERTERS[kind] = _converter(kind)
    return convert(value)


_CONVERTERS: dict[type, Callable[[Any], Any]] = {}
_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def _converter(kind: type) -> Callable[[Any], Any]:
    """How :func:`plain` converts a value of ``kind``, a type that is neither ndarray nor a plain scalar."""
    if issubclass(kind, np.ndarray):
        return lambda value: plain(value.view(np.ndarray))
    if issubclass(kind, np.generic):
        return lambda value: np.asarray(value).view(np.ndarray)[()]
    if issubclass(kind, Fraction):
        return lambda value: Fraction(plain(value.numerator), plain(value.denominator))
    for number in (int, float, complex):  # bool cannot be subclassed
        if issubclass(kind, number):
            return number
    if issubclass(kind, (tuple, list)):
        return functools.partial(_plain_sequence, kind, kind in (tuple, list) or hasattr(kind, "_make"))
    if issubclass(kind, dict):
        return functools.partial(_plain_mapping, kind is dict)
    if issubclass(kind, (set, frozenset)):
        return functools.partial(_plain_set, set if issubclass(kind, set) else frozenset, kind in (set, frozenset))
    if kind is range:  # Python's own integers, and its own comparisons
        return _identity
    if kind in _DICT_VIEWS:  # a dict's keys, values or items: a list of its entries, in order (a view cannot cross)
        return functools.partial(_plain_sequence, list, False)
    if dataclasses.is_dataclass(kind):
        return functools.partial(_plain_fields, tuple(field.name for field in dataclasses.fields(kind) if field.init))
    impersonated = [name for name in _DATA_PROTOCOL if _defines(kind, name)]
    if impersonated:
        return functools.partial(_refuse, f"a {kind.__module__}.{kind.__qualname__}, which defines "
                                          f"{', '.join(impersonated[:4])}")
    return _identity


# What a value must define to pass for a number, an array or a sequence of them in a verifier's arithmetic,
# comparisons and conversions. An object that is none of these (an environment, a figure) passes as it is.
_DATA_PROTOCOL = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__", "__int__",
                  "__index__", "__complex__", "__abs__", "__neg__", "__add__", "__radd__", "__sub__", "__rsub__",
                  "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__matmul__", "__rmatmul__",
                  "__array__", "__array_ufunc__", "__array_function__", "__array_interface__", "__len__",
                  "__iter__", "__getitem__")


def _defines(kind: type, name: str) -> bool:
    """Whether ``kind`` has ``name`` of its own, not object's."""
    found = getattr(kind, name, None)
    return found is not None and found is not getattr(object, name, None)


class NotPlainData(TypeError):
    """A result that only pretends to be a number, an array or a sequence: the description of what it is."""


def _refuse(what: str, value: Any) -> Any:
    raise NotPlainData(what)


def _plain_sequence(kind: type, keeps_kind: bool, value: Any) -> Any:
    items = _converted(enumerate(value), list, value)
    if items is None:
        if keeps_kind:
            return value
        items = list(value)
    if hasattr(kind, "_make"):
        return kind._make(items)
    return tuple(items) if isinstance(value, tuple) else items


def _plain_set(base: type, keeps_kind: bool, value: Any) -> Any:
    items = [plain(item) for item in value]
    if keeps_kind and all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return base(items)


def _plain_mapping(keeps_kind: bool, value: dict[Any, Any]) -> dict[Any, Any]:
    items = _converted(value.items(), dict, value)
    if items is None:
        return value if keeps_kind else dict(value)
    return items


def _converted(pairs: Iterable[tuple[Any, Any]], copy: type, value: Any) -> Any:
    """``copy(value)`` with each item :func:`plain` changes replaced (by its key or index); None if none changed."""
    items = None
    for key, item in pairs:
        converted = plain(item)
        if converted is not item:
            if items is None:
                items = copy(value)
            items[key] = converted
    return items


def _plain_fields(names: tuple[str, ...], value: Any) -> Any:
    changed = {}
    for name in names:
        item = getattr(value, name)
        converted = plain(item)
        if converted is not item:
            changed[name] = converted
    return dataclasses.replace(value, **changed) if changed else value


def _plain_objects(array: np.ndarray) -> np.ndarray:
    """An object array whose elements are :func:`plain` (the same array when they already are); its elements
    must be numbers (Fractions, say, for exact arithmetic) or arrays and sequences of them."""
    try:
        elements = [plain(element) for element in array.flat]
    except NotPlainData as error:
        raise NotPlainData(f"an object array holding {error}") from None
    strangers = {type(element) for element in elements
                 if type(element) not in _NUMBERS and not isinstance(element, (np.ndarray, list, tuple))}
    if strangers:
        raise NotPlainData(f"an object array of {', '.join(sorted(kind.__qualname__ for kind in strangers))}")
    if all(new is old for new, old in zip(elements, array.flat, strict=True)):
        return array
    converted = np.empty(array.shape, dtype=object)
    converted.flat[:] = elements
    return converted


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

        ``run`` is a :class:`harness.SeedRun`: ``run.impl`` (the implementation, imported where the
        seed runs), ``run.seed``, and ``run.call_reporting(loop, ...)``, which passes a training
        loop a ``progress`` callback if it takes one. Tasks go to a local process pool or to
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
        """A confidence interval for the mean of ``samples`` at this check's alpha."""
        if self.shift:
            samples = np.asarray(samples, dtype=float) + self.shift
            support = (support[0] + self.shift, support[1] + self.shift)
        return stats.mean_estimate(samples, support, self.alpha, self.beta, method)

    def save_figure(self, figure: Any, name: str) -> str:
        """Save a matplotlib figure as ``<name>.svg``, byte-for-byte reproducible; return its path.

        The path is relative to the report directory (``figures/<name>.svg``) so the report can
        link it; record it among the verifier's observations.
        """
        import matplotlib

        self.figures_dir.mkdir(parents=True, exist_ok=True)
        path = self.figures_dir / f"{name}.svg"
        # A fixed hash salt and no date keep the SVG identical for identical data.
        with matplotlib.rc_context({"svg.hashsalt": "claims", "svg.fonttype": "none"}):
            figure.savefig(path, format="svg", metadata={"Date": None})
        return f"{self.figures_dir.name}/{path.name}"
