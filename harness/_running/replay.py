"""Judging in float64 by replay: a check that hands the implementation fractions, for an implementation that declines
them (PyTorch, JAX, ``__claims_exact_arithmetic__ = False``) and a verifier with no float twin of its own.

The check runs as written with every function it uses served by the reference implementation, in exact arithmetic,
and every call it makes is recorded: the arguments and the reference's exact answer (:func:`recording`). The
reference's observations must pass the check's expectations (they are the statement, shown exactly in the
reference's report); what is judged of the implementation under test is that it computes what the statement is
about: each recorded call is made again to it with the arguments rounded to float64 (:func:`float_answers`), and
each number of its answer must lie within a rounding bound of the reference's exact one (:func:`verdicts`).

The bound (:func:`with_bounds`) is what a backward-stable float computation may be off by: the exact answer to
inputs each moved by up to ``k`` roundings of itself, ``k`` the number of input numbers of the call plus eight (each
input number passes through at most as many operations as there are numbers: a sum, a recursion over the steps).
To first order that is the sum over the inputs of the change of the answer when that one input moves by ``k``
units in the last place. The changes are measured with the reference, one input at a time, in float64 and larger
(by ``STEP`` of the input, in either direction) and scaled down, which is exact for a function linear in that
input and first-order for a smooth one; a float measurement's own rounding is far below what it measures. Where a
number of the answer jumps rather than moves (a step, the far side of a clip: it changes as much for a step a
thousand times smaller), the values on either side, and any between them, are accepted as well: a tie the rounding
may break either way, or a gradient at a kink that averages its sides (JAX's at a clip's boundary);
a discrete number of the answer (an integer or a boolean array: a greedy action, a clipping flag) likewise. The
answer's own rounding to float64 is added. The bound is the call's own sensitivity, not a tolerance chosen here.

Written here: no library judges a float computation against an exact one with a bound derived from the exact
function's own sensitivity.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from claims_harness._claims.expect import Comparison
from claims_harness._running.wire import Record
from claims_harness.errors import ClaimsError

# Where the recorded calls ride in the reference's observations, and the verdicts in the check's.
CALLS_KEY = "__replayed_calls__"
REPLAY_KEY = "__replayed__"
UNIT_ROUNDOFF = 2.0**-53
# The operations an input number may pass through besides the call's own numbers (a normalisation, a final sum).
EXTRA_OPERATIONS = 8
# How far each input is moved, relative to itself, to measure the answer's change (then scaled to k roundings), and
# the step a thousandth of it that tells a jump (which does not shrink with the step) from a change (which does).
STEP = 2.0**-26
SMALL_STEP = STEP / 1024
# The most input numbers of one call moved one at a time (four calls of the reference each, in float64): a call with
# more is not replayed, and says so.
MAX_MOVED = 16384
# The most numbers the arguments of one message of calls to the reference hold.
BATCH_NUMBERS = 1 << 20


@contextlib.contextmanager
def recording(module: Any) -> Iterator[list[dict[str, Any]]]:
    """Every call to a function made through ``module`` (the reference's server) inside the block: its function,
    arguments and exact answer (or what it raised), copied when made."""
    calls: list[dict[str, Any]] = []
    request = module.request

    def recorded(*message: Any) -> Any:
        if message[0] != "call" or message[1] is not None:  # a method of an object that stays there: not replayed
            return request(*message)
        _, _, name, args, kwargs, _guarded = message
        call = {"function": name, "args": copy.deepcopy(args), "kwargs": copy.deepcopy(kwargs)}
        calls.append(call)
        try:
            answer = request(*message)
        except Exception as error:
            call["raised"] = f"{type(error).__name__}: {error}"
            raise
        call["answer"] = copy.deepcopy(answer)
        return answer

    module.request = recorded
    try:
        yield calls
    finally:
        del module.request


def replayable(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``calls``, each that cannot be replayed (it raised, or answered what is not numbers) with why not
    (``not_replayed``)."""
    return [call if "answer" in call and _numbers_only(call["answer"]) else
            {**call, "not_replayed": "it raised" if "raised" in call else "its answer is not numbers"}
            for call in calls]


def needs_bound(call: dict[str, Any], answer: dict[str, Any]) -> bool:
    """Whether ``answer`` (the implementation's to a replayable ``call``) is off by more than its own rounding, so that
    only the call's rounding bound can judge it (:func:`with_bounds`, which costs calls of the reference)."""
    return "not_replayed" not in call and _deviation({**call, "bounds": _own_rounding(call), "ties": {}},
                                                     answer) is not None


def with_bounds(module: Any, calls: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """``calls`` (replayable), each with the rounding bound of every number of its answer (``bounds``, by leaf) and
    the values on the far side of a jump moved inputs give (``ties``, by leaf); each it cannot bound with why not
    (``not_replayed``), those left when ``seconds`` are spent among them."""
    deadline = time.monotonic() + seconds
    return [_bounded(module, call) if time.monotonic() < deadline else
            {**call, "not_replayed": "its rounding bound would take past the check's time limit"} for call in calls]


def _own_rounding(call: dict[str, Any]) -> dict[str, np.ndarray]:
    return {path: 2 * UNIT_ROUNDOFF * np.abs(np.asarray(value, dtype=float))
            for path, value in _leaves(call["answer"]) if not _discrete(value)}


def _bounded(module: Any, call: dict[str, Any]) -> dict[str, Any]:
    given = _in_floats((call["args"], call["kwargs"]))
    slots = list(_input_numbers(given))
    if len(slots) > MAX_MOVED:
        return {**call, "not_replayed": f"more than {MAX_MOVED} input numbers to move one at a time"}
    scale = (len(slots) + EXTRA_OPERATIONS) * UNIT_ROUNDOFF / STEP
    answers = _answers(module, call["function"],
                       [given, *(_moved(given, slot, 1 + sign * STEP) for slot in slots for sign in (1, -1))])
    if answers[0] is None:
        return {**call, "not_replayed": "the reference refuses its arguments in float64"}
    base = {path: np.asarray(value, dtype=float) for path, value in _leaves(answers[0])}
    exact = dict(_leaves(call["answer"]))
    bounds = _own_rounding(call)
    ties: dict[str, list[Any]] = {path: [] if path in bounds or _same(value, exact[path]) else [value]
                                  for path, value in _leaves(answers[0])}  # a discrete answer in float64 already
    # Not a real number to the function (an index, a count): it refuses it moved.
    large = {position: [dict(_leaves(answer)) for answer in answers[1 + 2 * position:3 + 2 * position]]
             for position in range(len(slots)) if _all_answered(answers[1 + 2 * position:3 + 2 * position])}
    # A move that changes the answer as a straight line does (the two changes opposite and equal) needs no more; the
    # others (a kink, a jump, a discrete answer that changed) are moved by the small step too, to tell them apart.
    bent = [position for position, pair in large.items() if not _straight(pair, base, bounds)]
    smaller = _answers(module, call["function"], [_moved(given, slots[position], 1 + sign * SMALL_STEP)
                                                  for position in bent for sign in (1, -1)]) if bent else []
    small = {position: [dict(_leaves(answer)) for answer in smaller[2 * i:2 * i + 2]]
             for i, position in enumerate(bent) if _all_answered(smaller[2 * i:2 * i + 2])}
    for position, pair in large.items():
        if position in bent and position not in small:
            continue
        for path in exact:
            if path not in bounds:  # a discrete number: what the inputs moved by the small step give is a tie
                ties[path].extend(answer[path] for answer in small.get(position, [])
                                  if not _same(answer[path], exact[path]))
                continue
            changes = _largest_change(pair, base, path)
            if position not in small:
                bounds[path] = bounds[path] + changes * scale
                continue
            small_changes = _largest_change(small[position], base, path)
            jumps = (small_changes > changes / 16) & (small_changes > 64 * UNIT_ROUNDOFF * np.abs(base[path]))
            bounds[path] = bounds[path] + np.where(jumps, 0.0, changes * scale)
            if np.any(jumps):
                ties[path].extend(np.where(jumps, np.asarray(answer[path], dtype=float), np.nan)
                                  for answer in small[position])
    return {**call, "bounds": bounds, "ties": {path: found for path, found in ties.items() if found}}


def _all_answered(answers: list[Any]) -> bool:
    return all(answer is not None for answer in answers)


def _largest_change(pair: list[dict[str, Any]], base: dict[str, np.ndarray], path: str) -> np.ndarray:
    return np.maximum(*(np.abs(np.asarray(answer[path], dtype=float) - base[path]) for answer in pair))


def _straight(pair: list[dict[str, Any]], base: dict[str, np.ndarray], numeric: Mapping[str, Any]) -> bool:
    """Whether the answers to an input moved up and down change as a line does: every discrete number unchanged,
    every other changed by opposite amounts (to their own rounding and a millionth of the change)."""
    up, down = pair
    for path, value in base.items():
        if path not in numeric:
            if not (_same(up[path], value) and _same(down[path], value)):
                return False
            continue
        rise, fall = (np.asarray(answer[path], dtype=float) - value for answer in (up, down))
        slack = 1e-6 * np.maximum(np.abs(rise), np.abs(fall)) + 64 * UNIT_ROUNDOFF * np.abs(value)
        if np.any(np.abs(rise + fall) > slack):
            return False
    return True


def _answers(module: Any, function: str, arguments: list[tuple[Any, Any]]) -> list[Any]:
    """The reference's answers to ``function`` called with each of ``arguments`` (None where it raised), in one
    message."""
    size = max(1, sum(np.size(leaf) for _, leaf in _leaves(list(arguments[0]))))
    batch = max(1, BATCH_NUMBERS // size)
    return [value if status == "ok" else None
            for start in range(0, len(arguments), batch)
            for status, value in module.request("calls", function, [tuple(each) for each in
                                                                    arguments[start:start + batch]])]


def float_answers(module: Any, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The implementation's answer to each call with its arguments in float64 (or what it raised). The harness's own
    findings about a call (a float32 result, a keyword it does not take, a function not written yet) are raised, as
    in a check that calls it directly: they are errors or reasons not to judge, not wrong answers."""
    answers = []
    for call in calls:
        args, kwargs = _in_floats(call["args"]), _in_floats(call["kwargs"])
        try:
            answers.append({"answer": module.request("call", None, call["function"], args, kwargs, True)})
        except (ClaimsError, NotImplementedError):
            raise
        except Exception as error:
            answers.append({"raised": f"{type(error).__name__}: {error}"})
    return answers


def verdicts(calls: list[dict[str, Any]], answers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per function: how many of its calls were replayed, how many answers left their bounds, and what the first was
    given and answered against the reference's exact answer (or None), and the calls not replayed, by why."""
    found: dict[str, dict[str, Any]] = {}
    for call, answer in zip(calls, answers, strict=True):
        verdict = found.setdefault(call["function"], {"calls": 0, "wrong": 0, "first": None, "not_replayed": {}})
        if "not_replayed" in call:
            verdict["not_replayed"][call["not_replayed"]] = verdict["not_replayed"].get(call["not_replayed"], 0) + 1
            continue
        verdict["calls"] += 1
        why = _deviation({"bounds": _own_rounding(call), "ties": {}, **call}, answer)
        if why is not None:
            verdict["wrong"] += 1
            why = f"given {_arguments(call)}, {why}"
            if verdict["first"] is None:
                verdict["first"] = why
    return found


def replay_comparisons(replayed: Mapping[str, Mapping[str, Any]]) -> list[Comparison]:
    """One comparison per function of a check judged by replay: its calls' float answers within their rounding
    bounds of the reference's exact ones."""
    comparisons = []
    for function, verdict in replayed.items():
        if not verdict["calls"]:
            continue
        first = verdict["first"]
        observed = (f"all {verdict['calls']} within" if first is None else
                    f"{verdict['wrong']} of {verdict['calls']} off; the first: {first}")
        left = sum(verdict["not_replayed"].values())
        if left:
            observed += f" ({left} more not replayed: {'; '.join(verdict['not_replayed'])})"
        comparisons.append(Comparison(function, f"the reference's exact answer to each of its {verdict['calls']} "
                                                "calls, to within a derived rounding bound", observed, first is None,
                                      "replayed in float64"))
    return comparisons


def _deviation(call: dict[str, Any], answer: dict[str, Any]) -> str | None:
    if "raised" in answer:
        return f"it raised {answer['raised']}, where the reference answers {_shown(call['answer'])}"
    expected, observed = dict(_leaves(call["answer"])), dict(_leaves(answer["answer"]))
    if set(expected) != set(observed):
        return f"it answers {_structure(observed)} where the reference answers {_structure(expected)}"
    for path, exact in expected.items():
        where = f" ({path})" if path else ""
        given = observed[path]
        if np.shape(given) != np.shape(exact):
            return f"shape {np.shape(given)}{where} where the reference's answer has shape {np.shape(exact)}"
        ties = call["ties"].get(path, [])
        if path not in call["bounds"]:
            if not (_same(given, exact) or any(_same(given, tie) for tie in ties)):
                return f"{_shown(given)}{where} where the reference answers {_shown(exact)}"
            continue
        try:
            off = np.abs(np.asarray(given, dtype=float) - np.asarray(exact, dtype=float))
            exactly = np.vectorize(lambda g, e: abs(Fraction(float(g)) - Fraction(e)), otypes=[object])(given, exact)
        except (TypeError, ValueError):
            return f"{_shown(given)}{where} is not a number where the reference answers {_shown(exact)}"
        bound = np.asarray(call["bounds"][path], dtype=float)
        beyond = np.vectorize(lambda d, b: d > Fraction(float(b)), otypes=[bool])(exactly, bound)
        if ties:  # at a jump: its sides, or any value between them (a gradient at a kink may average its sides)
            sides = np.stack([np.asarray(exact, dtype=float), *ties])
            lowest, highest = np.nanmin(sides, axis=0), np.nanmax(sides, axis=0)
            value = np.asarray(given, dtype=float)
            beyond &= ~((lowest - bound <= value) & (value <= highest + bound))
        if np.any(beyond):
            worst = np.unravel_index(int(np.argmax(np.where(beyond, off - bound, -np.inf))), np.shape(off)) \
                if np.ndim(off) else ()
            return (f"{_shown(given)}{where} where the reference answers exactly {_shown(exact)}: "
                    f"{float(np.asarray(off)[worst]):.3g} off at {list(map(int, worst))}, past the rounding bound "
                    f"{float(np.asarray(bound)[worst]):.3g}")
    return None


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """The numbers of an answer by where they are: a tuple's items, a record's fields, a mapping's values."""
    if isinstance(value, Record):
        for name, item in value._asdict().items():
            yield from _leaves(item, f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _leaves(item, f"{path}[{name!r}]")
    elif isinstance(value, tuple | list):
        for position, item in enumerate(value):
            yield from _leaves(item, f"{path}[{position}]")
    else:
        yield path, value


def _numbers_only(value: Any) -> bool:
    return all(isinstance(leaf, np.ndarray | int | float | Fraction | np.number | np.bool_) and
               (not isinstance(leaf, np.ndarray) or leaf.dtype.kind in "biufO")
               for _, leaf in _leaves(value))


def _discrete(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biu"
    return isinstance(value, bool | np.bool_ | np.integer)


def _input_numbers(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Where the call's numbers are (not its booleans or strings), each nonzero one: a rounding of a zero is none. An
    integer may be a real number to the function (a reward of 1) or an index: moved, the second is refused."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiuO":
        for index in np.ndindex(value.shape):
            item = value[index]
            if isinstance(item, Fraction | int | float | np.number) and not isinstance(item, bool) and item != 0:
                yield (*path, index)
    elif isinstance(value, Fraction | int | float | np.number) and not isinstance(value, bool | np.bool_) \
            and value != 0:
        yield path
    elif isinstance(value, tuple | list):
        for position, item in enumerate(value):
            yield from _input_numbers(item, (*path, position))
    elif isinstance(value, dict | Record):
        for key, item in (value._asdict() if isinstance(value, Record) else value).items():
            yield from _input_numbers(item, (*path, key))


def _moved(value: Any, slot: tuple[Any, ...], factor: float) -> Any:
    """``value`` (arguments in float64) with the number at ``slot`` multiplied by ``factor``."""
    if not slot:
        return float(value) * factor
    head, rest = slot[0], slot[1:]
    if isinstance(value, np.ndarray):
        moved = value.astype(float)
        moved[head] = moved[head] * factor
        return moved
    if isinstance(value, tuple | list):
        items = list(value)
        items[head] = _moved(items[head], rest, factor)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, Record):
        return value._replace(**{head: _moved(getattr(value, head), rest, factor)})
    moved = dict(value)
    moved[head] = _moved(value[head], rest, factor)
    return moved


def _in_floats(value: Any) -> Any:
    """Arguments as a float implementation gets them: every fraction rounded to the nearest float64."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        if all(isinstance(item, Fraction | int | float) and not isinstance(item, bool) for item in value.flat):
            return np.array([float(item) for item in value.flat], dtype=float).reshape(value.shape)
        return value
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_in_floats(item) for item in value))
    if isinstance(value, tuple | list):
        return type(value)(_in_floats(item) for item in value)
    if isinstance(value, dict):
        return {key: _in_floats(item) for key, item in value.items()}
    if isinstance(value, Record):
        return value._replace(**{key: _in_floats(item) for key, item in value._asdict().items()})
    return value


def _same(a: Any, b: Any) -> bool:
    return np.shape(a) == np.shape(b) and bool(np.all(np.asarray(a) == np.asarray(b)))


def _structure(leaves: dict[str, Any]) -> str:
    return ", ".join(path or "one value" for path in leaves) or "nothing"


def _shown(value: Any, width: int = 160) -> str:
    text = np.array2string(np.asarray(value, dtype=float), precision=6, threshold=12, max_line_width=10**6) \
        if isinstance(value, np.ndarray) and value.dtype.kind in "fO" else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _arguments(call: dict[str, Any]) -> str:
    """A call's arguments as one short line (in float64, as the implementation was given them)."""
    args, kwargs = _in_floats((call["args"], call["kwargs"]))
    shown = [_shown(arg, 60) for arg in args] + [f"{name}={_shown(arg, 60)}" for name, arg in kwargs.items()]
    return f"{call['function']}({', '.join(shown)})"
