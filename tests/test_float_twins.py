"""Every statement judged for every framework: a check that hands the implementation fractions has a float twin.

An implementation that cannot compute in fractions (PyTorch, JAX, ``__claims_exact_arithmetic__ = False``) declines
an exact check; where the verifier has a float twin (``verifier(in_floats=...)``), the twin runs in its place on
float64 inputs and reports each number as a :class:`claims_harness.Rounded` with the rounding bound it derived, which
the harness compares with the same expectation. Value iteration is judged this way for PyTorch (the example module
passes, tests/test_torch.py), and the checks that iterate tell converging from stopping early.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import pytest

from claims_harness import Rounded, RunOptions, load_catalogue, run_check
from claims_harness._claims.expect import Condition, compare_condition
from claims_harness._running.processes import judge_records
from claims_harness._running.wire import decode, encode

ROOT = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")

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

CHECKS = [("value-iteration-two-states", "tabular.value_iteration_two_states"),
          ("value-iteration-is-synchronous", "tabular.value_iteration_relabelled_two_states"),
          ("value-iteration-is-synchronous", "tabular.value_iteration_synchronous_property"),
          ("bellman-operator-contracts", "tabular.value_iteration_convergence_property"),
          ("bellman-operator-contracts", "tabular.value_iteration_runs_every_sweep_property")]


def _results(directory: Path, impl: str) -> dict[str, object]:
    catalogue = load_catalogue(ROOT / "claims")
    found = {}
    sys.path.insert(0, str(directory))
    try:
        for claim_id, verifier in CHECKS:
            entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
            index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier)
            found[verifier] = run_check(entry, index, catalogue.verifiers[verifier],
                                        RunOptions(impl=impl, cache_dir=None, directory=str(directory)))
    finally:
        sys.path.remove(str(directory))
    return found


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
