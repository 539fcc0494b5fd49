"""Every statement judged for every framework: a check that hands the implementation fractions has a float twin.

An implementation that cannot compute in fractions (PyTorch, JAX, ``__claims_exact_arithmetic__ = False``) declines
an exact check; where the verifier has a float twin (``verifier(in_floats=...)``), the twin runs in its place on
float64 inputs and reports each number as a :class:`claims_harness.Rounded` with the rounding bound it derived, which
the harness compares with the same expectation. Value iteration is judged this way for PyTorch (the example module
passes, tests/test_torch.py), and the checks that iterate tell converging from stopping early; so is the property
that λ keeps GAE's mean, whose one batch of every path is too large to replay.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import course_catalogue

from claims_harness import Rounded, RunOptions, run_check
from claims_harness.engine import Condition, compare_condition, decode, encode, judge_records

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")

GAUSS_SEIDEL_IN_TORCH = """
import torch
from impl import *  # noqa: F403

__claims_reference_fallback__ = True


def value_iteration(P, R, gamma, n_iterations, v_0=None):
    P, R = torch.as_tensor(P), torch.as_tensor(R)
    V = torch.zeros(P.shape[0], dtype=P.dtype) if v_0 is None else torch.as_tensor(v_0).clone()
    for _ in range(n_iterations):
        for s in range(P.shape[0]):
            V[s] = (R[s] + gamma * (P[s] @ V)).max()
    return V
"""

STOPS_AT_A_TOLERANCE_IN_TORCH = """
import torch
from impl import *  # noqa: F403

__claims_reference_fallback__ = True


def value_iteration(P, R, gamma, n_iterations, v_0=None):
    P, R = torch.as_tensor(P), torch.as_tensor(R)
    V = torch.zeros(P.shape[0], dtype=P.dtype) if v_0 is None else torch.as_tensor(v_0)
    for _ in range(n_iterations):
        new = (R + gamma * P @ V).max(dim=-1).values
        if (new - V).abs().max() < 1e-8:
            return new
        V = new
    return V
"""

GAE_IN_FLOATS = """
import numpy as np
from impl import *  # noqa: F403

__claims_exact_arithmetic__ = False
__claims_reference_fallback__ = True


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    r_t, v_t, v_tp1 = (np.asarray(x, dtype=np.float64) for x in (r_t, v_t, v_tp1))
    delta_t = r_t + {bootstrap} * (1 - np.asarray(terminated_t)) * v_tp1 - v_t
    continue_t = gamma * lambda_ * (np.asarray(trace_cut_t) == 0)
    advantage = np.zeros_like(delta_t)
    following = np.zeros(delta_t.shape[1:]) if carry is None else np.asarray(carry, dtype=np.float64)
    for t in reversed(range(delta_t.shape[0])):
        advantage[t] = following = delta_t[t] + continue_t[t] * following
    return advantage
"""

CHECKS = [("value-iteration-two-states", "tabular.value_iteration_two_states"),
          ("value-iteration-is-synchronous", "tabular.value_iteration_relabelled_two_states"),
          ("value-iteration-is-synchronous", "tabular.value_iteration_synchronous_property"),
          ("bellman-operator-contracts", "tabular.value_iteration_convergence_property"),
          ("bellman-operator-contracts", "tabular.value_iteration_runs_every_sweep_property")]


def _results(directory: Path, impl: str, checks: list[tuple[str, str]] = CHECKS) -> dict[str, object]:
    catalogue = course_catalogue()
    found = {}
    sys.path.insert(0, str(directory))
    try:
        for claim_id, verifier in checks:
            entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
            index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier)
            found[verifier] = run_check(entry, index, catalogue.verifiers[verifier],
                                        RunOptions(impl=impl, cache_dir=None, directory=str(directory)))
    finally:
        sys.path.remove(str(directory))
    return found


@needs_torch
@pytest.mark.parametrize(("source", "failing"), [
    (GAUSS_SEIDEL_IN_TORCH, {"tabular.value_iteration_relabelled_two_states",
                             "tabular.value_iteration_synchronous_property"}),
    (STOPS_AT_A_TOLERANCE_IN_TORCH, {"tabular.value_iteration_runs_every_sweep_property"}),
])
def test_an_in_place_or_early_stopping_value_iteration_in_pytorch_fails(tmp_path, source, failing):
    (tmp_path / "student_vi.py").write_text(source, encoding="utf-8")
    results = _results(tmp_path, "student_vi")
    assert {name for name, result in results.items() if result.status == "failed"} == failing, \
        {name: (result.status, result.error) for name, result in results.items()}
    assert not any(result.not_judged for result in results.values())


@pytest.mark.parametrize(("bootstrap", "status"), [("gamma", "passed"), ("gamma * lambda_", "failed")])
def test_gae_in_floats_is_judged_by_the_twin_of_lambda_keeps_expectation(tmp_path, bootstrap, status):
    """The property hands gae_advantages every path of an exact MDP at once, too many numbers to replay; its twin
    hands them over in float64: a float GAE passes, one that reads λ as a second discount fails."""
    (tmp_path / "student_gae.py").write_text(GAE_IN_FLOATS.replace("{bootstrap}", bootstrap), encoding="utf-8")
    verifier = "gae.gae_lambda_keeps_expectation_property"
    result = _results(tmp_path, "student_gae", [("gae-mixes-horizons", verifier)])[verifier]
    assert (result.status, result.in_floats) == (status, "twin"), (result.status, result.error, result.skip_reason)


@pytest.mark.parametrize(("operator", "observed", "passed"), [
    ("exact", Rounded(0.1, 1e-16), True),  # 0.1 in float64 is 5.55e-18 from 1/10
    ("exact", Rounded(0.1, 1e-18), False),
    ("exact", Rounded(0.10000001, 1e-12), False),
    ("less_than", Rounded(0.0999, 1e-3), False),  # the band reaches past 1/10
    ("less_than", Rounded(0.0999, 1e-5), True),
])
def test_a_rounded_observation_is_compared_within_its_bound(operator, observed, passed):
    condition = Condition(operator, Fraction(1, 10), "0.1")
    comparison = compare_condition("x", condition, observed)
    assert comparison.passed is passed, comparison
    assert comparison.observed == {"float64": observed.value, "rounding_bound": observed.bound}


def test_a_rounded_observation_crosses_as_data():
    known = judge_records()
    value = [Rounded(1.9000000000000001, 2e-15)]
    assert decode(encode(value, records=known.values()), known=known) == value
