"""Direct draws from the harness's strategies (claims_harness.strategies, claims_harness._running.draws), and
properties run on them (_running.property).

Issue 17: a property's examples are drawn without Hypothesis' engine, which cost 1 to 50 ms an
example; Hypothesis runs only to shrink a failure, and for a strategy of Hypothesis' own. Issue 44:
the strategies are the harness's descriptions, built as Hypothesis' through its public API only.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
import textwrap
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import course_catalogue, view_of
from hypothesis import strategies as hst

import impl
from claims_harness import (
    Context,
    ImplementationError,
    RunOptions,
    VerifierError,
    assume,
    check_property,
    run_check,
)
from claims_harness import strategies as st
from claims_harness._running import property as _property
from claims_harness._running.draws import CannotDraw, Rejected, draw
from claims_harness.engine import Profile


def _context(profile: str = "smoke", shrink: bool = False) -> Context:
    return Context(impl=view_of(impl, ("softmax",), "tests.draws", "draws"), params=None,
                   rng=np.random.default_rng(0), seed=0, profile=profile, alpha=0.01, beta=0.01, deviation=None,
                   figures_dir=Path("figures"), seed_runner=None, shrink=shrink)


def _draws(strategy, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return [draw(strategy, rng) for _ in range(n)]


def _every_smoke_property_holds() -> int:
    """Run every property check of the smoke profile against the reference; assert each holds; how many ran."""
    catalogue = course_catalogue()
    checked = 0
    for entry in catalogue.entries:
        for index, check in enumerate(entry.claim.checks):
            if check.kind != "property" or "smoke" not in check.profiles:
                continue
            result = run_check(entry, index, catalogue.verifiers[check.verifier],
                               RunOptions(impl="impl", profile="smoke", isolation=False, cache_dir=None))
            # A few examples are too few for a count some checks expect; the property itself must hold.
            assert result.error is None and result.observed.get("holds", True) is True, (entry.id, index, result)
            checked += 1
    return checked


def test_every_property_of_the_course_is_drawn_directly(monkeypatch):
    """No property falls back to Hypothesis' engine (correct, but slow): each is built with claims_harness.strategies
    alone."""
    fallbacks = []
    monkeypatch.setattr(_property, "PROFILES", {name: Profile(120.0, 3) for name in ("smoke", "full")})
    monkeypatch.setattr(_property, "_under_hypothesis",
                        lambda ctx, test, strategies, examples: fallbacks.append(test.__qualname__))
    assert _every_smoke_property_holds() >= 80 and fallbacks == []


def test_every_property_of_the_course_holds_under_hypothesis_too(monkeypatch):
    """The strategies as Hypothesis builds them (its public API only), which shrink a failure: each runs under
    Hypothesis' engine and holds (with the oldest Hypothesis the project admits too: tox -e hypothesis-oldest)."""
    engine_runs = []
    under_hypothesis = _property._under_hypothesis

    def forced(ctx, test, strategies, examples):
        raise CannotDraw("this test runs every property under Hypothesis")

    def counted(ctx, test, strategies, examples):
        engine_runs.append(test.__qualname__)
        return under_hypothesis(ctx, test, strategies, examples)

    monkeypatch.setattr(_property, "PROFILES", {name: Profile(120.0, 1) for name in ("smoke", "full")})
    monkeypatch.setattr(_property, "_first_failing_draw", forced)
    monkeypatch.setattr(_property, "_under_hypothesis", counted)
    assert _every_smoke_property_holds() >= 80 and len(engine_runs) >= 80


def test_a_property_that_holds_never_imports_hypothesis():
    """Hypothesis is imported only to shrink a failure or to run a strategy of its own: a passing property, in a
    process of its own, draws every kind of strategy without it (nor pays pytest's compiling of its modules)."""
    script = textwrap.dedent("""
        import importlib.abc
        import sys

        class NoHypothesis(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "hypothesis":
                    raise ImportError(f"{name} imported")

        sys.meta_path.insert(0, NoHypothesis())
        from fractions import Fraction
        from pathlib import Path

        import numpy as np
        from conftest import view_of

        import impl
        from claims_harness import Context, check_property
        from claims_harness import strategies as st

        @st.composite
        def pairs(draw, high):
            first = draw(st.integers(0, high))
            return first, draw(st.integers(first, high))

        everything = st.tuples(
            st.integers(), st.floats(), st.fractions(-1, 1, max_denominator=9), st.booleans(), st.none(),
            st.just(3), st.sampled_from("abc"), st.permutations([1, 2, 3]), st.one_of(st.integers(0, 1), st.just("x")),
            st.lists(st.integers(0, 9), max_size=4, unique=True), st.builds(Fraction, st.integers(0, 3)),
            pairs(5), st.integers(0, 3).map(str).filter(lambda text: text != "2"),
            st.integers(1, 3).flatmap(lambda n: st.arrays(np.float64, (n, 2), elements=st.floats(-1, 1))))

        def holds(values, logits):
            assert np.isclose(ctx.impl.softmax(logits).sum(), 1.0)

        ctx = Context(impl=view_of(impl, ("softmax",), "tests.draws", "draws"), params=None,
                      rng=np.random.default_rng(0), seed=0, profile="smoke", alpha=0.01, beta=0.01, deviation=None,
                      figures_dir=Path("figures"), seed_runner=None, shrink=False)
        print(check_property(ctx, holds, everything, st.arrays(np.float64, 3, elements=st.floats(-5, 5))))
        print(sorted(name for name in sys.modules if name.partition(".")[0] == "hypothesis"))
    """)
    tests = Path(__file__).resolve().parent
    run = subprocess.run([sys.executable, "-c", script], cwd=tests.parent, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])},
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["{'holds': True, 'examples': 200}", "[]"]


def test_check_property_refuses_what_is_not_a_strategy_naming_the_property_and_the_fix():
    def takes_a_list(values):
        pass

    with pytest.raises(VerifierError, match=r"property takes_a_list \(.*test_draws\): check_property's strategy 2 "
                                            r"is list \[1, 2\], not a strategy\. Build it with the harness's "
                                            r"strategies \(from claims_harness import strategies as st"):
        check_property(_context(), takes_a_list, st.integers(), [1, 2])
    with pytest.raises(TypeError, match=r"elements=\[1, 2\] is not a strategy"):
        st.lists([1, 2])


SETS = {
    "integers": (st.integers(-3, 3), lambda v: type(v) is int and -3 <= v <= 3),
    "floats excluding a bound": (st.floats(-1.5, 2.0, exclude_min=True), lambda v: -1.5 < v <= 2.0),
    "floats without nan": (st.floats(allow_nan=False), lambda v: type(v) is float and not math.isnan(v)),
    "fractions": (st.fractions(Fraction(-1, 3), 2, max_denominator=12),
                  lambda v: type(v) is Fraction and Fraction(-1, 3) <= v <= 2 and v.denominator <= 12),
    "lists": (st.lists(st.booleans(), min_size=1, max_size=3), lambda v: 1 <= len(v) <= 3 and {*v} <= {True, False}),
    "unique lists": (st.lists(st.sampled_from("abcd"), min_size=2, unique=True),
                     lambda v: 2 <= len(v) == len({*v}) <= 4 and {*v} <= {*"abcd"}),
    "permutations": (st.permutations("xyz"), lambda v: sorted(v) == ["x", "y", "z"]),
    "one_of": (st.one_of(st.none(), st.just(1.5)), lambda v: v in (None, 1.5)),
    "builds": (st.builds(Fraction, st.integers(0, 9), denominator=st.integers(1, 3)),
               lambda v: type(v) is Fraction and 0 <= v <= 9 and v.denominator <= 3),
    "arrays of a drawn shape": (
        st.arrays(np.int64, st.integers(0, 3).map(lambda n: (n, 2)), elements=st.integers(-1, 1)),
        lambda v: v.dtype == np.int64 and v.shape[1:] == (2,) and v.shape[0] <= 3 and np.isin(v, [-1, 0, 1]).all()),
    "unique arrays": (st.arrays("U3", 4, elements=st.sampled_from(["a", "bc", "d", "ef"]), unique=True),
                      lambda v: v.dtype == np.dtype("U3") and sorted(v.tolist()) == ["a", "bc", "d", "ef"]),
    "filter and map": (st.integers(0, 50).filter(lambda n: n % 7 == 0).map(lambda n: n // 7),
                       lambda v: v in range(8)),
}


@pytest.mark.parametrize("name", SETS)
def test_the_harness_and_hypothesis_draw_from_the_same_set(name):
    """A description's values, drawn here and by Hypothesis from the strategy it builds, lie in the set it describes."""
    strategy, member = SETS[name]
    assert all(member(value) for value in _draws(strategy, n=500))

    def inside(value):
        assert member(value), value

    assert _property._under_hypothesis(_context(), inside, [strategy], 200)["holds"] is True


@pytest.mark.parametrize("low, high", [(-3, 7), (0, 0), (1, 2**40), (-(2**70), 2**70)])
def test_integers_stay_in_their_bounds_and_reach_both(low, high):
    values = _draws(st.integers(low, high))
    assert all(type(v) is int and low <= v <= high for v in values)
    assert {low, high} <= set(values)


@pytest.mark.parametrize("low, high", [(-100.0, 100.0), (0.01, 0.99), (1e-6, 1.0), (-1e6, 1e6), (-3.0, -1.0)])
def test_floats_stay_in_their_bounds_reach_both_and_spread_over_magnitudes(low, high):
    values = np.array(_draws(st.floats(low, high)))
    assert np.isfinite(values).all() and ((low <= values) & (values <= high)).all()
    assert {low, high} <= set(values.tolist())
    inside = values[(values > low) & (values < high)]
    assert len(np.unique(inside)) > 1000
    if low < 0 < high:
        assert (np.abs(values) < 1e-3).mean() > 0.05 and (values == 0).any()


def test_floats_without_bounds_include_nan_and_small_and_huge_values():
    values = np.array(_draws(st.floats(), n=5000))
    assert np.isnan(values).any()
    finite = np.abs(values[np.isfinite(values)])
    assert (finite < 1).mean() > 0.2 and (finite > 1e100).any()


def test_floats_that_exclude_subnormals_or_bounds_respect_it():
    values = _draws(st.floats(0.0, 1.0, exclude_min=True, allow_subnormal=False))
    assert all(v >= 2.2250738585072014e-308 and v <= 1.0 for v in values)


def test_lists_reach_both_sizes_and_sometimes_repeat_one_value():
    values = _draws(st.lists(st.integers(0, 10**6), min_size=2, max_size=9))
    sizes = {len(v) for v in values}
    assert sizes == set(range(2, 10))
    assert any(len(set(v)) == 1 for v in values if len(v) > 2)


def test_unique_lists_are_unique_and_a_too_small_pool_is_rejected():
    values = _draws(st.lists(st.integers(0, 6), min_size=3, max_size=7, unique=True))
    assert all(len(set(v)) == len(v) and 3 <= len(v) <= 7 for v in values)
    with pytest.raises(Rejected):
        draw(st.lists(st.integers(0, 10).map(lambda x: 1), min_size=2, unique=True), np.random.default_rng(0))


def test_fractions_composites_arrays_and_transformations_draw_what_their_strategies_describe():
    fractions = _draws(st.fractions(min_value=-10, max_value=10, max_denominator=64))
    assert all(type(f) is Fraction and -10 <= f <= 10 and f.denominator <= 64 for f in fractions)

    @st.composite
    def ordered_pairs(draw_, high):
        first = draw_(st.integers(0, high))
        return first, draw_(st.integers(first, high))

    assert all(a <= b <= 5 for a, b in _draws(ordered_pairs(5)))
    arrays = _draws(st.arrays(np.float64, st.integers(1, 4).map(lambda n: (n, 2)), elements=st.floats(-1, 1)))
    assert all(a.shape[1] == 2 and 1 <= a.shape[0] <= 4 and np.abs(a).max() <= 1 for a in arrays)
    assert any(len(np.unique(a)) == 1 for a in arrays if a.size > 2)
    mapped = _draws(st.sampled_from([1, 2, 3]).map(lambda x: 10 * x).filter(lambda x: x > 10))
    assert set(mapped) == {20, 30}
    assert set(_draws(st.one_of(st.just("a"), st.booleans()))) == {"a", True, False}
    assert all(sorted(p) == [1, 2, 3] for p in _draws(st.permutations([1, 2, 3])))
    built = _draws(st.builds(Fraction, st.integers(1, 9), denominator=st.just(7)))
    assert all(f.denominator in (1, 7) for f in built)


def test_a_filter_that_never_holds_rejects_and_an_unknown_strategy_cannot_be_drawn():
    with pytest.raises(Rejected):
        draw(st.integers(0, 10).filter(lambda x: x < 0 or False), np.random.default_rng(0))
    with pytest.raises(CannotDraw, match="a Hypothesis strategy, which only Hypothesis' engine draws from: text"):
        draw(hst.text(), np.random.default_rng(0))
    with pytest.raises(CannotDraw, match="a Hypothesis strategy"):
        draw(st.tuples(st.integers(0, 3), hst.text()), np.random.default_rng(0))


def test_a_passing_property_counts_its_examples_and_a_failing_one_reports_the_drawn_example():
    def bounded(x):
        assert x < 900, x

    assert check_property(_context(), lambda x: None, st.integers()) == {"holds": True, "examples": 200}
    result = check_property(_context(), bounded, st.integers(0, 1000))
    assert result["holds"] is False
    x = int(result["falsifying_example"]["assertion"].splitlines()[0])
    assert x >= 900 and f"x={x}," in result["falsifying_example"]["input"]


def test_a_failure_is_shrunk_by_hypothesis_in_the_full_profile_and_with_shrink():
    def bounded(x):
        assert x < 900, x

    for ctx in (_context("full"), _context("smoke", shrink=True)):
        result = check_property(ctx, bounded, st.integers(0, 10**6))
        assert result["holds"] is False
        assert "x=900" in result["falsifying_example"]["input"]


def test_a_hypothesis_strategy_runs_under_hypothesis_and_still_finds_the_failure():
    def short(text):
        assert len(text) < 3, text

    result = check_property(_context(), short, hst.text())
    assert result["holds"] is False and "text=" in result["falsifying_example"]["input"]

    def short_and_small(pair):
        assert len(pair[1]) < 3 or pair[0] > 3, pair

    result = check_property(_context(), short_and_small, st.tuples(st.integers(0, 3), hst.text()))
    assert result["holds"] is False and "pair=(" in result["falsifying_example"]["input"]


@pytest.mark.parametrize("strategy", [st.integers(0, 100), hst.text()], ids=["drawn", "hypothesis"])
def test_assume_discards_examples_on_either_path(strategy):
    seen = []

    def only_even(x):
        assume(hash(x) % 2 == 0)
        seen.append(x)
        assert hash(x) % 2 == 0

    assert check_property(_context(), only_even, strategy)["holds"] is True
    assert seen


def test_a_property_whose_draws_are_mostly_rejected_is_an_error_not_a_pass():
    def only_zero(x):
        assume(x == 0)

    with pytest.raises(VerifierError, match=r"only_zero .*only (\d+) of its 200 examples could be drawn; the other "
                                            r"(\d+) of 2000 draws were rejected") as raised:
        check_property(_context(), only_zero, st.integers(0, 100))
    held, rejected = map(int, re.search(r"only (\d+) of .* the other (\d+) of", str(raised.value)).groups())
    assert held + rejected == 2000 and held < 200 and "move the condition into the strategy" in str(raised.value)


# An implementation module of its own, so that its frames are not the test's (see _rejected_by_the_verifier).
REJECTING_IMPLEMENTATION = """
import hypothesis

from claims_harness import assume


def softmax(logits):
    assume(False)


def log_softmax(logits):
    hypothesis.assume(False)
"""


@pytest.mark.parametrize("strategy", [st.integers(0, 100), hst.text()], ids=["drawn", "hypothesis"])
@pytest.mark.parametrize("profile", ["smoke", "full"])
@pytest.mark.parametrize("function", ["softmax", "log_softmax"])
@pytest.mark.filterwarnings("ignore:Using `assume` outside a property-based test")  # what the hostile one does
def test_an_implementation_that_rejects_its_examples_fails_the_check_on_either_path(strategy, profile, function):
    hostile = types.ModuleType("rejecting_implementation")
    exec(REJECTING_IMPLEMENTATION, hostile.__dict__)
    ctx = dataclasses.replace(_context(profile), impl=view_of(hostile, (function,), "tests.draws", "draws"))

    def calls_it(x):
        getattr(ctx.impl, function)(np.zeros(3))

    signal = {"softmax": "Rejected", "log_softmax": "UnsatisfiedAssumption"}[function]
    with pytest.raises(ImplementationError, match=f"rejecting_implementation.{function} raised {signal}"):
        check_property(ctx, calls_it, strategy)


def test_under_hypothesis_the_examples_reported_are_those_that_ran():
    assert check_property(_context(), lambda text: None, hst.text(alphabet="a", max_size=1)) == {"holds": True,
                                                                                         "examples": 2}
    assert check_property(_context(), lambda text: None, hst.text()) == {"holds": True, "examples": 200}


def test_a_property_that_fails_only_once_is_an_error_not_a_verdict():
    calls = []

    def flaky(x):
        calls.append(x)
        assert len(calls) > 1

    with pytest.raises(Exception, match="held when it was run again"):
        check_property(_context(), flaky, st.integers(0, 3))


def test_an_implementation_error_in_a_drawn_example_propagates_with_its_calls():
    def calls_softmax(x):
        ctx.impl.softmax(np.array(["not a number"] * x))

    ctx = _context()
    with pytest.raises(Exception) as raised:
        check_property(ctx, calls_softmax, st.integers(1, 3))
    assert any("softmax(" in note for note in getattr(raised.value, "__notes__", []))


def test_nan_edges_are_real_nans():
    assert any(math.isnan(v) for v in _draws(st.floats(allow_nan=True), n=3000))
