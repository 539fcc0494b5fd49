"""Properties inside verifiers (examples drawn from claims_harness.strategies, failures shrunk by Hypothesis): seeded
from the check, verdict as an observation. A property verifier is written as the property itself (:func:`given`).

A failing property is reported as what a student can act on, not as Hypothesis' dump of the verifier's own
variables: the calls the falsifying example made to the student's functions (each argument by its parameter name,
what came back), the assertion's own message (the verifiers' comparison names the values it compared; no assert is
rewritten, so ``pytest claims/`` and ``claims verify`` say the same), and one line of Python that makes the same
calls. Writing that line is hand-written here because it must be exact: ``repr`` of an array abbreviates, rounds and
names ``array``, which the line could not run.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np

from claims_harness._claims.formats import FALSIFYING_KEY, PROFILES, format_falsifying
from claims_harness._running import reaching
from claims_harness._running.context import Call, CallRecord, Context, record_calls
from claims_harness._running.draws import CannotDraw, Rejected, draw
from claims_harness.errors import CheckCrashed, CheckTimeout, ClaimsError, VerifierError
from claims_harness.strategies import SearchStrategy, as_hypothesis, is_hypothesis_strategy

# Smoke runs want a verdict fast: a failure is reported as found. The full profile, or a run with
# --claims-shrink (Context.shrink), also shrinks it to a minimal falsifying example, which takes
# seconds to tens of seconds a failing check: every phase of Hypothesis. (The smoke profile's phases
# by their names in hypothesis.Phase: Hypothesis is imported only when a property runs under it.)
SMOKE_PHASES = ("explicit", "reuse", "generate")
# The calls of one example that a failure report shows; a verifier may call a function in a loop.
CALLS_KEPT = 5
# The most characters of one value, and of the reproduction, that the results keep. Hypothesis' examples are far
# shorter (they are exact: format_falsifying cuts them for reading); a property that passes a huge array to
# the implementation is reported without its line rather than with megabytes of it.
LONGEST = 100_000

# What ends a check at once, never a failing example: its time limit, and the implementation's process dying.
_ENDS_THE_CHECK = (CheckTimeout, CheckCrashed)


def check_property(ctx: Context, test: Callable[..., None], *strategies: SearchStrategy[Any]) -> dict[str, Any]:
    """Run ``test`` on examples drawn from ``strategies``; report whether it held.

    The strategies are built with :mod:`claims_harness.strategies` (``from claims_harness import strategies as st``),
    one for each argument of ``test``. The property fails when ``test`` raises ``AssertionError``. The
    examples are drawn directly (``claims_harness._running.draws``), far faster than Hypothesis' engine;
    Hypothesis runs only to shrink a failure (the full profile, or ``--claims-shrink``), and for a
    strategy that is, or holds, one of Hypothesis' own, which only its engine draws from. Returns
    ``{"holds": bool, "examples": n}``; a claim expects ``holds: true``. A failure adds
    ``falsifying_example``: ``{"input", "calls", "calls_left_out", "assertion", "reproduce"}``
    (:func:`falsifying_example`), from the shrunk example when Hypothesis found one, else from the
    drawn one. Another exception raised by a function of the implementation propagates (the check
    is an error) with the same calls and reproduction as a note. ``test`` may call :func:`assume`;
    a property whose draws are rejected too often to reach its examples is a ``VerifierError``, and an
    implementation that raises a rejection itself is an ``ImplementationError``: neither passes.
    """
    examples = PROFILES[ctx.profile].examples
    _check_strategies(test, strategies)
    try:
        failing = _first_failing_draw(ctx, test, strategies, examples)
    except CannotDraw:
        return _under_hypothesis(ctx, test, strategies, examples)
    if failing is None:
        return {"holds": True, "examples": examples}
    if ctx.shrink or ctx.profile == "full":
        shrunk = _under_hypothesis(ctx, test, strategies, examples)
        if not shrunk["holds"]:
            return shrunk
    return _replayed(ctx, test, strategies, failing, examples)


def given(*strategies: SearchStrategy[Any]) -> Callable[[Callable[..., None]], Callable[[Context], dict[str, Any]]]:
    """A property verifier written as the property itself, as Hypothesis' ``@given`` writes a test::

        @verifier(kind="property", uses=("gae_advantages",))
        @given(_segments)
        def telescoping_property(ctx: Context, segment: tuple) -> None:
            assert ...  # what must hold of one drawn example

    The verifier runs :func:`check_property` on the example's function (its name and parameters
    are the falsifying example's), one strategy per parameter after ``ctx``, and returns its
    ``{"holds", "examples"}``. A strategy built from the check's parameters needs ``check_property`` itself.
    """

    def decorate(holds_of: Callable[..., None]) -> Callable[[Context], dict[str, Any]]:
        signature = inspect.signature(holds_of)

        @functools.wraps(holds_of)
        def property_verifier(ctx: Context) -> dict[str, Any]:
            def example(*arguments: Any) -> None:
                holds_of(ctx, *arguments)

            example.__name__, example.__qualname__, example.__module__ = (holds_of.__name__, holds_of.__qualname__,
                                                                        holds_of.__module__)
            example.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
            return check_property(ctx, example, *strategies)

        return property_verifier

    return decorate


def _check_strategies(test: Callable[..., None], strategies: Sequence[Any]) -> None:
    for position, strategy in enumerate(strategies, start=1):
        if not isinstance(strategy, SearchStrategy) and not is_hypothesis_strategy(strategy):
            raise VerifierError(
                f"property {test.__name__} ({test.__module__}): check_property's strategy {position} is "
                f"{type(strategy).__qualname__} {repr(strategy)[:200]}, not a strategy. Build it with the harness's "
                "strategies (from claims_harness import strategies as st; st.just(value) for a fixed value), which "
                "mirror "
                "Hypothesis' (hypothesis.strategies and hypothesis.extra.numpy.arrays)")


def assume(condition: object) -> None:
    """Discard the current example of a property unless ``condition`` holds (Hypothesis' ``assume``)."""
    if not condition:
        raise Rejected("assume() did not hold")


# A property whose examples are rejected this many times as often as it needs them stops there.
REJECTIONS_PER_EXAMPLE = 10


def _first_failing_draw(ctx: Context, test: Callable[..., None], strategies: Sequence[SearchStrategy[Any]],
                        examples: int) -> dict[str, Any] | None:
    """The generator state from which the first failing example was drawn, or None when all held.

    Nothing is recorded here: a failure is drawn again from its state and replayed with its calls
    recorded (:func:`_replayed`), so the passing examples pay no copies.
    """
    rng = np.random.default_rng(ctx.seed)
    held = drawn = 0
    while held < examples and drawn < REJECTIONS_PER_EXAMPLE * examples:
        drawn += 1
        state = rng.bit_generator.state
        try:
            arguments = [draw(strategy, rng) for strategy in strategies]
        except Rejected:  # a strategy's filter
            continue
        reached = reaching.mark()
        try:
            test(*arguments)
        except Rejected:  # the verifier's assume() (the implementation's process cannot raise it here)
            reaching.rewind(reached)
            continue
        except _ENDS_THE_CHECK:
            raise
        except Exception:
            return state
        held += 1
    if held < examples:
        raise VerifierError(
            f"property {test.__name__} ({test.__module__}): only {held} of its {examples} examples could be drawn; "
            f"the other {drawn - held} of {drawn} draws were rejected by assume() or a strategy's filter, and a "
            f"property stops after {REJECTIONS_PER_EXAMPLE} draws per example it needs. It cannot state that it "
            f"held on {examples} examples: draw the inputs inside the domain (move the condition into the "
            f"strategy), so that fewer than one draw in {REJECTIONS_PER_EXAMPLE} is rejected")
    return None


def _replayed(ctx: Context, test: Callable[..., None], strategies: Sequence[SearchStrategy[Any]],
              state: dict[str, Any], examples: int) -> dict[str, Any]:
    """The failing drawn example run again, its calls recorded: the verdict's evidence, or the error it raised."""
    rng = np.random.default_rng(ctx.seed)
    rng.bit_generator.state = state
    arguments = [draw(strategy, rng) for strategy in strategies]
    shown = _arguments_shown(test, arguments)
    with record_calls(ctx.impl, CALLS_KEPT) as record:
        record.start_example()
        try:
            test(*arguments)
        except AssertionError as error:
            error.add_note(f"Falsifying example: {test.__name__}(\n{shown}\n)")
            return {"holds": False, "examples": examples,
                    FALSIFYING_KEY: falsifying_example(error, test.__name__, record)}
        except Exception as error:
            if any(call.raised is error for call in record.calls):
                error.add_note("\n".join(format_falsifying(_recorded(record))))
            raise
    raise ClaimsError(f"property {test.__name__} failed on the example ({shown}) once and held when it was run "
                      "again: the verifier or the implementation depends on something besides its arguments")


def _arguments_shown(test: Callable[..., None], arguments: Sequence[Any]) -> str:
    """The arguments as Hypothesis writes a falsifying example: one ``    name=value,`` line each."""
    try:
        names = list(inspect.signature(test).bind(*arguments).arguments)
    except (TypeError, ValueError):
        names = [f"[{index}]" for index in range(len(arguments))]
    return "\n".join(f"    {name}={_shown(argument)}," for name, argument in zip(names, arguments, strict=True))


def _under_hypothesis(ctx: Context, test: Callable[..., None], strategies: Sequence[SearchStrategy[Any]],
                      examples: int) -> dict[str, Any]:
    """The property run by Hypothesis' engine: the examples it generates, and its shrinking of a failure."""
    import hypothesis  # here: a property that holds on its drawn examples never loads Hypothesis

    settings = hypothesis.settings(
        max_examples=examples, deadline=None, database=None, print_blob=False,
        phases=(list(hypothesis.Phase) if ctx.shrink or ctx.profile == "full"
                else [hypothesis.Phase[name] for name in SMOKE_PHASES]),
        report_multiple_bugs=False,
        suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.filter_too_much],
    )
    with record_calls(ctx.impl, CALLS_KEPT) as record:

        @functools.wraps(test)
        def example(*args: Any, **kwargs: Any) -> None:
            record.start_example()
            reached = reaching.mark()
            try:
                test(*args, **kwargs)
            except Rejected:  # the verifier's assume() (the implementation's process cannot raise it here)
                reaching.rewind(reached)
                hypothesis.reject()
            completed.append(True)

        completed: list[bool] = []

        given = hypothesis.given(*(as_hypothesis(strategy) for strategy in strategies))
        run = hypothesis.seed(ctx.seed)(settings(given(example)))
        try:
            run()
        except _ENDS_THE_CHECK:
            raise
        except BaseException as error:
            # Hypothesis wraps what a replay raised (FlakyFailure, an exception group): a timeout reads as one.
            timeout = _timeout_within(error)
            if timeout is not None:
                raise timeout from None
            if isinstance(error, AssertionError):
                return {"holds": False, "examples": examples,
                        FALSIFYING_KEY: falsifying_example(error, test.__name__, record)}
            if isinstance(error, Exception) and any(call.raised is error for call in record.calls):
                # The implementation raised: the check is an error, whose traceback shows the calls that led there.
                error.add_note("\n".join(format_falsifying(_recorded(record))))
            raise
    # Hypothesis stops early once it has tried every example a small strategy has.
    return {"holds": True, "examples": len(completed)}


def falsifying_example(error: BaseException, test_name: str, record: CallRecord) -> dict[str, Any]:
    """The failing example as JSON: Hypothesis' note on the input, the recorded calls, the assertion, a reproduction.

    ``calls`` holds ``{"function", "arguments": {parameter: value}, "returned" | "raised": value}``, values
    written as Python; an argument the signature cannot bind is named by its position, ``[0]``.
    """
    notes = [note for note in getattr(error, "__notes__", []) if f"{test_name}(" in note]
    return {"input": "\n".join(notes), **_recorded(record), "assertion": str(error)}


def _recorded(record: CallRecord) -> dict[str, Any]:
    return {"calls": [_call_observation(call) for call in record.calls], "calls_left_out": record.left_out,
            "reproduce": reproduction(record.module, record.calls)}


def reproduction(module: ModuleType, calls: Sequence[Call]) -> str:
    """One line of Python that makes ``calls`` to ``module``, e.g. ``import numpy as np; from m import f; f(x=...)``.

    When an argument has no literal form (a generator, an object), or the module has no function of
    the name (the harness called a stand-in the course accepts, an alias), the line says so instead.
    """
    if not calls:
        return "nothing to reproduce: the example called no function of the implementation"
    imports: set[str] = set()
    statements = []
    for call in calls:
        if getattr(module, call.function, None) is not call.target:
            return (f"not as one line: {module.__name__} has no function {call.function}; the harness called a "
                    "stand-in for it (an alias the course accepts)")
        written = []
        for name, how, value in _passed(call):
            try:
                text = _literal(value, imports)
            except _NoLiteral as missing:
                return (f"not as one line: argument {name!r} of {call.function} is {missing}, "
                        "which cannot be written as a literal")
            if how == "keyword" and not name.isidentifier():
                written.append(f"**{{{name!r}: {text}}}")
            else:
                written.append({"keyword": f"{name}={text}", "positional": text, "spread": f"*{text}"}[how])
        statements.append(f"{call.function}({', '.join(written)})")
    functions = ", ".join(dict.fromkeys(call.function for call in calls))
    header = ["import numpy as np", *(["from fractions import Fraction"] if "fractions" in imports else []),
              f"from {module.__name__} import {functions}"]
    line = "; ".join([*header, *statements])
    return line if len(line) <= LONGEST else f"not as one line: the calls' arguments take {len(line)} characters"


def _call_observation(call: Call) -> dict[str, Any]:
    observation: dict[str, Any] = {"function": call.function,
                                   "arguments": {name: _shown(value) for name, _, value in _passed(call)}}
    if call.raised is not None:
        observation["raised"] = _shown(call.raised)
    else:
        observation["returned"] = _shown(call.returned)
    return observation


def _passed(call: Call) -> list[tuple[str, str, Any]]:
    """``(name, how, value)`` for each argument of ``call``, ``how`` one of keyword, positional, spread.

    Named by the function's parameters where its signature binds the call; a parameter that must be
    passed by position (positional-only, or before a filled ``*args``) is passed so.
    """
    try:
        signature = inspect.signature(call.target)
        bound = signature.bind(*call.args, **call.kwargs)
    except (TypeError, ValueError):  # no signature (a builtin), or the call does not fit it
        return ([(f"[{index}]", "positional", value) for index, value in enumerate(call.args)]
                + [(name, "keyword", value) for name, value in call.kwargs.items()])
    kinds = {name: signature.parameters[name].kind for name in bound.arguments}
    spread = inspect.Parameter.VAR_POSITIONAL in kinds.values()
    passed = []
    for name, value in bound.arguments.items():
        kind = kinds[name]
        if kind is inspect.Parameter.VAR_POSITIONAL:
            passed.append((f"*{name}", "spread", value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            passed += [(key, "keyword", item) for key, item in value.items()]
        elif kind is inspect.Parameter.POSITIONAL_ONLY or (kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and spread):
            passed.append((name, "positional", value))
        else:
            passed.append((name, "keyword", value))
    return passed


def _shown(value: Any) -> str:
    """``value`` as the results keep it: its literal when it has one, else its repr; cut to LONGEST characters."""
    try:
        text = _literal(value, set())
    except _NoLiteral:
        try:
            text = repr(value)
        except ClaimsError:  # the check's timeout
            raise
        except Exception as error:
            text = f"<{type(value).__qualname__} object, whose repr raised {type(error).__name__}>"
    return text if len(text) <= LONGEST else text[:LONGEST] + "..."


class _NoLiteral(Exception):
    """A value that Python source cannot write exactly; the message says what it is."""


# dtypes an array literal writes exactly: booleans, integers, and floats and complex numbers of at most double
# precision (``tolist`` gives Python numbers, whose repr is the shortest that reads back to the same bits).
_LITERAL_DTYPES = frozenset(np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"))


def _literal(value: Any, imports: set[str]) -> str:
    """Python source that evaluates to ``value`` exactly, given ``import numpy as np`` and the names in ``imports``.

    Raises:
      _NoLiteral: when there is none (an object, a generator, a long double).
    """
    if isinstance(value, np.generic):  # before float: np.float64 is a float
        if value.dtype not in _LITERAL_DTYPES:
            raise _NoLiteral(f"a numpy {value.dtype} scalar")
        return f"np.{type(value).__name__}({_literal(value.item(), imports)})"
    if value is None or type(value) in (bool, int, str, bytes):
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float('{value}')"
    if type(value) is complex:
        return f"complex({_literal(value.real, imports)}, {_literal(value.imag, imports)})"
    if type(value) is Fraction:
        imports.add("fractions")
        return f"Fraction({value.numerator}, {value.denominator})"
    if type(value) is list:
        return f"[{', '.join(_literal(item, imports) for item in value)}]"
    if type(value) is tuple:
        items = [_literal(item, imports) for item in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if type(value) is dict:
        return f"{{{', '.join(f'{_literal(k, imports)}: {_literal(v, imports)}' for k, v in value.items())}}}"
    if type(value) is np.ndarray:
        return _array_literal(value, imports)
    raise _NoLiteral(f"a {type(value).__module__}.{type(value).__qualname__}")


def _array_literal(array: np.ndarray, imports: set[str]) -> str:
    if array.dtype == object:
        dtype = "object"
        # Nested sequences would be read back as more dimensions: only an array of scalars is written.
        if any(isinstance(item, (list, tuple, dict, np.ndarray)) for item in array.flat):
            raise _NoLiteral("a numpy object array holding sequences")
    elif array.dtype in _LITERAL_DTYPES:
        dtype = repr(array.dtype.name)
    else:
        raise _NoLiteral(f"a numpy {array.dtype} array")
    if array.size == 0:  # a list of no numbers does not say the shape
        return f"np.empty({array.shape!r}, dtype={dtype})"
    return f"np.array({_literal(array.tolist(), imports)}, dtype={dtype})"


def _timeout_within(error: BaseException) -> ClaimsError | None:
    """What ended the check (its timeout, or the implementation's process dying) inside ``error``'s group, cause or
    context, if anything did."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, _ENDS_THE_CHECK):
            return current
        pending += [*getattr(current, "exceptions", ()), *(e for e in (current.__cause__, current.__context__) if e)]
    return None
