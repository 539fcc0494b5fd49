"""A failing property check names the student's function, shows its inputs and output, and reproduces the call.

Issue 15: a property that caught a wrong implementation used to report the verifier's own assertion
tuple, ``(0, 7, np.float64(0.0), 5.786...)``, and Hypothesis' dump of the verifier's variables. The
failure now carries the calls the falsifying example made to the implementation (each argument by
its parameter name, what came back), the assertion with the values it compared (the verifiers'
comparison names them), and a line of Python that makes the same calls.
"""

from __future__ import annotations

import ast
import math
import pickle
import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import course_catalogue, course_entry, view_of

import impl
from claims_harness import (
    ClaimsError,
    Context,
    ImplementationView,
    RunOptions,
    VerifierError,
    check_property,
    given,
    run_check,
)
from claims_harness import strategies as st
from claims_harness._claims.formats import FALSIFYING_WIDTH, format_falsifying
from claims_harness._running.context import Call, record_calls
from claims_harness._running.property import CALLS_KEPT, reproduction
from claims_harness.engine import in_process

THIS = sys.modules[__name__]
TELESCOPING = ("gae-lambda-one-telescopes", "gae.telescoping_property")
# impl's GAE with the termination mask dropped from δ_t: it bootstraps from V(s_{K+1}) at a true terminal,
# which the telescoping property rejects.
BOOTSTRAPS_AT_TERMINALS = '''\
import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    return impl.gae_advantages(r_t, v_t, v_tp1, np.zeros_like(terminated_t), trace_cut_t, gamma, lambda_, carry=carry)
'''
GAE_PARAMETERS = ("r_t", "v_t", "v_tp1", "terminated_t", "trace_cut_t", "gamma", "lambda_")


def _run_check(claim_id: str, verifier: str, implementation: str = "impl"):
    entry = course_entry(claim_id)
    (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier]
    return run_check(entry, index, course_catalogue().verifiers[verifier], RunOptions(impl=implementation))


def _run_snippet(snippet: str) -> object:
    """Execute a reproduce line; the value of its last call, as an interpreter would show it."""
    statements = ast.parse(snippet).body
    namespace: dict = {}
    exec(compile(ast.Module(statements[:-1], []), "<reproduce>", "exec"), namespace)
    return eval(compile(ast.Expression(statements[-1].value), "<reproduce>", "eval"), namespace)


def _context(module: types.ModuleType, uses: tuple[str, ...], profile: str = "smoke") -> Context:
    return Context(impl=view_of(module, uses, "tests.property", "property-failures"), params=None,
                   rng=np.random.default_rng(0), seed=0, profile=profile, alpha=0.01, beta=0.01, deviation=None,
                   figures_dir=Path("figures"), seed_runner=None)


def _student(**functions) -> types.ModuleType:
    module = types.ModuleType("student_module")
    module.__dict__.update(functions)
    return module


@pytest.fixture
def planted_bug(tmp_path, monkeypatch):
    name = "gae_bootstraps_at_terminals"
    (tmp_path / f"{name}.py").write_text(BOOTSTRAPS_AT_TERMINALS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


# --------------------------------------------------------------------------- through the runner


def test_a_failing_property_names_the_function_and_its_parameters_and_reproduces_its_result(planted_bug):
    result = _run_check(*TELESCOPING, planted_bug)
    assert result.status == "failed", result.error
    assert result.observed["holds"] is False and result.observed["examples"] > 0
    example = result.observed["falsifying_example"]
    assert set(example) == {"input", "calls", "calls_left_out", "assertion", "reproduce"}
    assert "telescoping_property(" in example["input"] and "segment=" in example["input"]
    (call,) = example["calls"]
    assert call["function"] == "gae_advantages"
    assert tuple(call["arguments"]) == GAE_PARAMETERS
    assert example["reproduce"].startswith(f"import numpy as np; from {planted_bug} import gae_advantages; "
                                           "gae_advantages(r_t=np.array([")
    reproduced = _run_snippet(example["reproduce"])
    returned = eval(call["returned"], {"np": np})
    assert reproduced.dtype == returned.dtype and reproduced.tobytes() == returned.tobytes()
    # The reproduction calls the planted bug, not the reference: impl itself gives another value there.
    arguments = {name: eval(value, {"np": np}) for name, value in call["arguments"].items()}
    assert not np.array_equal(impl.gae_advantages(**arguments), reproduced)


REJECTS_ITS_EXAMPLES = '''\
from claims_harness import assume
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    assume(False)
'''


@pytest.mark.parametrize("profile", ["smoke", "full"])
def test_an_implementation_that_rejects_every_example_is_an_error_not_a_pass(tmp_path, monkeypatch, profile):
    name = "gae_rejects_its_examples"
    (tmp_path / f"{name}.py").write_text(REJECTS_ITS_EXAMPLES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        entry = course_entry(TELESCOPING[0])
        (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == TELESCOPING[1]]
        result = run_check(entry, index, course_catalogue().verifiers[TELESCOPING[1]],
                           RunOptions(impl=name, profile=profile))
    finally:
        sys.modules.pop(name, None)
    assert result.status == "error", (result.status, result.observed)
    assert f"{name}.gae_advantages raised Rejected" in result.error


def test_a_correct_implementation_holds_and_records_nothing():
    result = _run_check(*TELESCOPING, "impl")
    assert result.status == "passed", result.error
    assert result.observed == {"holds": True, "examples": 200}


# --------------------------------------------------------------------------- recording changes nothing


def test_outside_a_property_the_view_hands_out_the_functions_and_records_nothing():
    view = view_of(impl, ("gae_advantages",), "tests.property", "property-failures")
    handed_out = view.gae_advantages
    assert view.gae_advantages is handed_out
    with record_calls(view, CALLS_KEPT) as record:
        assert view.gae_advantages is not handed_out
    assert view.gae_advantages is handed_out
    handed_out(np.ones(2), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2), 0.9, 0.5)
    assert record.calls == []


def test_a_recorded_function_returns_and_raises_what_the_function_does():
    returned = np.arange(3.0)

    def answers(size):
        if size < 2:
            raise ValueError("a group needs two answers")
        return returned

    view = view_of(_student(answers=answers), ("answers",), "tests.property", "property-failures")
    with record_calls(view, CALLS_KEPT) as record:
        assert view.answers(3).tolist() == returned.tolist()  # the result crossed as data: equal, not the object
        with pytest.raises(ValueError, match="a group needs two answers") as raised:
            view.answers(size=1)
    assert [call.function for call in record.calls] == ["answers", "answers"]
    assert record.calls[0].returned.tolist() == returned.tolist() and record.calls[1].raised is raised.value


def test_neither_a_recorded_function_nor_the_view_is_sent_to_another_process():
    view = view_of(impl, ("discounted_returns",), "tests.property", "property-failures")
    with pytest.raises(ClaimsError, match="cannot be sent to another process"):
        pickle.dumps(view.discounted_returns)
    with record_calls(view, CALLS_KEPT):
        with pytest.raises(ClaimsError, match="cannot be sent to another process"):
            pickle.dumps(view.discounted_returns)
        with pytest.raises(VerifierError, match="sends ctx.impl to another process"):
            pickle.dumps(view)


def test_a_check_that_is_not_a_property_is_untouched():
    result = _run_check("bernoulli-group-estimators", "bernoulli.group_estimators_exact")
    assert result.status == "passed", result.error
    assert not any(isinstance(value, dict) and "calls" in value for value in result.observed.values())


# --------------------------------------------------------------------------- what a failure records


def test_a_function_raising_inside_a_property_is_recorded_as_raised():
    def normalise(rewards):
        rewards = np.asarray(rewards, dtype=float)
        if rewards.std() == 0:
            raise ZeroDivisionError("the rewards have no spread")
        return (rewards - rewards.mean()) / rewards.std()

    ctx = _context(_student(normalise=normalise), ("normalise",))

    def accepts_every_group(rewards):
        try:
            ctx.impl.normalise(rewards)
        except ZeroDivisionError:
            raise AssertionError("normalise refused a group of rewards") from None

    result = check_property(ctx, accepts_every_group, st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=2))
    (call,) = result["falsifying_example"]["calls"]
    assert call == {"function": "normalise", "arguments": {"rewards": call["arguments"]["rewards"]},
                    "raised": "ZeroDivisionError('the rewards have no spread')"}
    assert result["falsifying_example"]["assertion"] == "normalise refused a group of rewards"

    def never_raises(rewards):
        ctx.impl.normalise(rewards)

    # Raised through the property, the error is the check's, with the calls and the reproduction as a note.
    with pytest.raises(ZeroDivisionError) as raised:
        check_property(ctx, never_raises, st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=2))
    note = "\n".join(raised.value.__notes__)
    assert "call 1: normalise(rewards)" in note and "raised ZeroDivisionError('the rewards have no spread')" in note
    assert "reproduce: import numpy as np; from student_module import normalise; normalise(rewards=[" in note


def test_the_record_holds_the_falsifying_example_s_first_calls():
    ctx = _context(_student(scaled=lambda x, factor: x * factor), ("scaled",))

    def scales_by_zero(x):
        for factor in range(CALLS_KEPT + 3):
            ctx.impl.scaled(x, factor)
        assert x == 0, x

    result = check_property(ctx, scales_by_zero, st.integers(min_value=1, max_value=10**6))
    example = result["falsifying_example"]
    x = int(example["assertion"].splitlines()[0])
    assert f"x={x}" in example["input"]
    assert [call["arguments"] for call in example["calls"]] == [{"x": str(x), "factor": str(factor)}
                                                                 for factor in range(CALLS_KEPT)]
    assert [call["returned"] for call in example["calls"]] == [str(x * factor) for factor in range(CALLS_KEPT)]
    assert example["calls_left_out"] == 3


def test_a_property_in_the_full_profile_reports_the_shrunk_example():
    ctx = _context(_student(total=lambda values: sum(values) - (len(values) > 2)), ("total",), profile="full")

    def adds_up(values):
        assert ctx.impl.total(values) == sum(values)

    example = check_property(ctx, adds_up, st.lists(st.integers(0, 9)))["falsifying_example"]
    assert example["calls"] == [{"function": "total", "arguments": {"values": "[0, 0, 0]"}, "returned": "-1"}]
    assert example["reproduce"] == "import numpy as np; from student_module import total; total(values=[0, 0, 0])"


@pytest.mark.parametrize("profile", ["smoke", "full"])
def test_a_property_written_as_itself_is_named_by_its_function_and_parameters_drawn_or_shrunk(profile):
    @given(st.lists(st.integers(0, 9)), st.integers(1, 3))
    def total_property(ctx, values, repeats):
        for _ in range(repeats):
            assert ctx.impl.total(values) == sum(values), values

    holding = _context(_student(total=sum), ("total",), profile)
    assert total_property(holding) == {"holds": True, "examples": check_property(
        holding, lambda values, repeats: None, st.lists(st.integers(0, 9)), st.integers(1, 3))["examples"]}
    failing = _context(_student(total=lambda values: sum(values) - (len(values) > 2)), ("total",), profile)
    example = total_property(failing)["falsifying_example"]
    assert "total_property(" in example["input"] and "values=" in example["input"] and "repeats=" in example["input"]
    assert example["calls"][0]["function"] == "total"


# --------------------------------------------------------------------------- the reproduce line


def _echo(value):
    return value


@pytest.mark.parametrize("value", [
    np.array([0.1 + 0.2, -0.0, np.nan, np.inf, -np.inf, 5e-324, 1.7976931348623157e308]),
    np.array([[1.5, 2.25]], dtype=np.float32),
    np.array([1, 2], dtype=np.float16),
    np.array([[True, False]]),
    np.array([-(2**63), 2**63 - 1]),
    np.array([2**64 - 1], dtype=np.uint64),
    np.array([1 + 2j, np.nan * 1j], dtype=np.complex64),
    np.array(3.5),
    np.empty((0, 3)),
    np.array([Fraction(1, 3), Fraction(-2, 7)], dtype=object),
    np.float64(0.1), np.int32(-7), np.bool_(True),
    (0.1, [1, (2,)], {"k": None}), Fraction(5, 9), float("nan"), 10**30, "text", b"\x00", complex(0, -1),
], ids=repr)
def test_the_reproduce_line_writes_each_value_exactly(value):
    reproduced = _run_snippet(reproduction(THIS, [Call("_echo", _echo, (value,), {})]))
    assert type(reproduced) is type(value)
    if isinstance(value, np.ndarray):
        assert reproduced.dtype == value.dtype and reproduced.shape == value.shape
        assert np.array_equal(reproduced, value, equal_nan=value.dtype != object)
        if value.dtype != object:
            assert reproduced.tobytes() == value.tobytes()
    elif isinstance(value, float) and math.isnan(value):
        assert math.isnan(reproduced)
    else:
        assert reproduced == value


def _holding_a_list() -> np.ndarray:
    array = np.empty(1, dtype=object)
    array[0] = [1, 2]  # read back, np.array([[1, 2]], dtype=object) would have two dimensions
    return array


@pytest.mark.parametrize("value", [(x for x in range(3)), np.random.default_rng(0), np.array([object()]),
                                   np.array([1.0], dtype=np.longdouble), [1, _holding_a_list()]])
def test_a_value_without_a_literal_is_said_so(value):
    line = reproduction(_student(echo=_echo), [Call("echo", _echo, (value,), {})])
    assert line.startswith("not as one line: argument 'value' of echo is a")
    assert line.endswith("which cannot be written as a literal")


def _spread(a, /, b, *rest, c=1, **extra):
    return a, b, rest, c, extra


def test_the_reproduce_line_passes_each_argument_as_the_signature_takes_it():
    call = Call("_spread", _spread, (1, 2, 3, 4), {"c": 5, "d": 6})
    line = reproduction(THIS, [call])
    assert line.endswith("_spread(1, 2, *(3, 4), c=5, d=6)")
    assert _run_snippet(line) == _spread(1, 2, 3, 4, c=5, d=6)
    # A call its function's signature cannot bind is written by position.
    misfit = Call("_echo", _echo, (1, 2), {})
    assert reproduction(THIS, [misfit]).endswith("_echo(1, 2)")


def test_a_function_the_module_does_not_define_is_not_imported_from_it():
    """A course's alias: the harness calls a stand-in for the contract function, which the module does not define."""
    def stand_in(rewards):
        return rewards

    line = reproduction(_student(rloo_baseline=stand_in), [Call("leave_one_out_advantages", stand_in, ([1.0],), {})])
    assert line == ("not as one line: student_module has no function leave_one_out_advantages; the harness called "
                    "a stand-in for it (an alias the course accepts)")


# --------------------------------------------------------------------------- rendering


def test_a_falsifying_example_renders_as_lines_with_names_values_and_the_reproduce_line():
    long_value = "np.array([" + ", ".join(["0.1"] * 200) + "], dtype='float64')"
    reproduce = f"import numpy as np; from student_rl import gae_advantages; gae_advantages(r_t={long_value})"
    example = {"input": "Failing test case: telescopes(\n    segment=(...),\n)",
               "calls": [{"function": "gae_advantages", "arguments": {"r_t": long_value, "gamma": "0.9"},
                          "returned": "np.array([0.0], dtype='float64')"},
                         {"function": "td_errors", "arguments": {"[0]": "1.0"}, "raised": "ValueError('shape')"}],
               "calls_left_out": 2, "assertion": "(0, 7, 0.0, 5.786)\nassert 0.0 == 5.786", "reproduce": reproduce}
    lines = format_falsifying(example)
    assert all("\n" not in line for line in lines)
    assert lines[:3] == ["Failing test case: telescopes(", "    segment=(...),", ")"]
    assert "call 1: gae_advantages(r_t, gamma)" in lines
    assert "  gamma = 0.9" in lines and "  returned np.array([0.0], dtype='float64')" in lines
    assert any(line.startswith("  r_t = np.array([0.1") and line.endswith("...") for line in lines)
    assert max(len(line) for line in lines if not line.startswith("reproduce:")) <= FALSIFYING_WIDTH + 3
    assert "call 2: td_errors([0])" in lines and "  raised ValueError('shape')" in lines
    assert "(2 later calls of the example not recorded)" in lines
    assert lines[-4:] == ["assertion failed:", "  (0, 7, 0.0, 5.786)", "  assert 0.0 == 5.786",
                          f"reproduce: {reproduce}"]


def test_an_example_cached_as_hypothesis_note_still_renders():
    assert format_falsifying("Falsifying example: test(\n    x=0,\n)") == ["Falsifying example: test(", "    x=0,", ")"]


# --------------------------------------------------------------------------- the assertion's message


def test_a_failing_comparison_says_what_it_compared_without_pytest():
    """No assert is rewritten (``pytest claims/`` and ``claims verify`` report alike): the verifiers' comparison,
    ``assert_close``, carries the values into the falsifying example's assertion itself."""
    from verifiers._numeric import assert_close

    module = types.ModuleType("student")
    module.identity = lambda x: 0.0
    ctx = Context(ImplementationView(in_process(module), ("identity",), "checks.close_to_itself", "claim"), None,
                  np.random.default_rng(0), 0, "smoke", 0.01, 0.01, None, None, None)

    def identity_holds(x: float) -> None:
        assert_close(ctx.impl.identity(x), x, 0.0, "identity(x)")

    assertion = check_property(ctx, identity_holds, st.just(5.786))["falsifying_example"]["assertion"]
    assert assertion == "identity(x): 0.0 against 5.786, off by 5.79, more than the bound 0 (1 of 1 entries off)"


def test_a_view_handed_to_the_implementation_is_recorded_as_itself():
    """A property may pass ``ctx.impl`` on (``train_gru_policy(..., ops=ctx.impl)``): copying the call's
    arguments for the record must neither pickle the view (which refuses) nor copy it."""
    import copy

    import impl

    view = view_of(impl, ("kl_k3",), "a.verifier", "a-claim")
    assert copy.deepcopy({"ops": view})["ops"] is view


def test_every_assert_of_a_verifier_says_what_it_compared():
    """``claims verify`` runs the checks left after the cache without pytest, so no assert is rewritten there:
    a failing assert must carry its own message, or the report would say only that something failed."""
    verifiers = Path(__file__).resolve().parents[1] / "verifiers"
    bare = [f"{path.name}:{node.lineno}" for path in sorted(verifiers.glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"asserts without a message: {bare}"
