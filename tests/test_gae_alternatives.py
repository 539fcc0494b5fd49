"""GAE in two libraries' idioms: Stable-Baselines3's is correct and passes every claim that calls
``gae_advantages``; CleanRL's (``zoo.zeroed_truncation_bootstrap``) fails the truncation claims.

The GAE claims feed ``gae_advantages`` only buffers a rollout can store (a termination also cuts
the trace; where the trace goes on, V(s_{t+1}) is the next row's V(s_t)), which is what lets SB3's
idiom pass; the last tests show that restricting the inputs to that domain kept the checks able
to fail implementations that are wrong on it.
"""

from __future__ import annotations

import importlib
import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import checks_using, course_catalogue, course_entry, outcomes_against

import impl
from claims_harness import RunOptions, lookup, run_check
from zoo import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # examples/ is not installed with harness, verifiers, impl and zoo
SB3 = "examples.alternatives.sb3_gae"
sb3_gae = importlib.import_module(SB3)
CLEANRL = "zoo.zeroed_truncation_bootstrap"
GAE_CLAIMS = {node.split("::")[1] for node in checks_using(["gae_advantages"])}
TRUNCATION_CLAIMS = ("gae-four-events-table", "single-done-flag-biases-targets", "closing-map-termination-truncation")
# The training runs (PPO's loop builds its buffers the same way) are left to the slow SB3 test, which runs them once.
FAST_GAE_CLAIMS = tuple(entry.id for entry in course_catalogue().entries
                        if entry.id in GAE_CLAIMS and all(check.kind != "experiment" for check in entry.claim.checks))
ORDINARY, TERMINATED, CUT = 0, 1, 2  # a cut that is not a termination: a truncation or a buffer edge


def _rollout(rng: np.random.Generator, length: int, n_envs: int) -> tuple[np.ndarray, ...]:
    """r_t, v_t, v_tp1, terminated_t, trace_cut_t of a random buffer a rollout can store, in eighths."""
    def eighths(shape: tuple[int, ...]) -> np.ndarray:
        return np.vectorize(lambda k: Fraction(int(k), 8), otypes=[object])(rng.integers(-80, 81, shape))

    events = rng.choice([ORDINARY, ORDINARY, TERMINATED, CUT], size=(length, n_envs))
    terminated, trace_cut = (events == TERMINATED).astype(int), (events != ORDINARY).astype(int)
    r, v, v_next = eighths((length, n_envs)), eighths((length, n_envs)), eighths((length, n_envs))
    v_next[:-1] = np.where(trace_cut[:-1] != 0, v_next[:-1], v[1:])
    return r, v, v_next, terminated, trace_cut


def test_sb3_style_gae_equals_impl_exactly_on_rollouts_and_differs_off_them():
    rng = np.random.default_rng(13)
    gamma, lambda_ = Fraction(9, 10), Fraction(3, 4)
    for length in (1, 2, 7, 20):
        arrays = _rollout(rng, length, 3)
        assert np.array_equal(sb3_gae.gae_advantages(*arrays, gamma, lambda_),
                              impl.gae_advantages(*arrays, gamma, lambda_))
        carry = arrays[0][0] * 3
        assert np.array_equal(sb3_gae.gae_advantages(*arrays, gamma, lambda_, carry=carry),
                              impl.gae_advantages(*arrays, gamma, lambda_, carry=carry))
    # A termination that does not cut the trace is no rollout's: SB3 then bootstraps from the next row.
    r, v, v_next = (np.array([Fraction(k) for k in x], dtype=object) for x in ([1, 2], [3, 4], [5, 6]))
    terminated, not_cut = np.array([1, 0]), np.array([0, 0])
    assert not np.array_equal(sb3_gae.gae_advantages(r, v, v_next, terminated, not_cut, gamma, lambda_),
                              impl.gae_advantages(r, v, v_next, terminated, not_cut, gamma, lambda_))


def _failing(outcomes: dict) -> dict[str, str]:
    return {node: outcome.message for node, outcome in outcomes.items() if outcome.status in ("failed", "error")}


def test_sb3_style_gae_passes_every_check_that_calls_gae_advantages():
    assert set(TRUNCATION_CLAIMS) <= GAE_CLAIMS
    assert _failing(outcomes_against(SB3, checks_using(["gae_advantages"], kinds_left_out=("experiment",)))) == {}


@pytest.mark.slow
def test_sb3_style_gae_passes_the_training_runs_whose_loop_calls_it():
    """PPO's loop estimates every rollout's advantages with it (about 40 s of training, hence slow)."""
    others = checks_using(["gae_advantages"], kinds_left_out=("experiment",))
    experiments = [node for node in checks_using(["gae_advantages"]) if node not in others]
    outcomes = outcomes_against(SB3, experiments)
    assert _failing(outcomes) == {} and sum(outcome.status == "passed" for outcome in outcomes.values()) >= 10


def test_cleanrl_style_gae_fails_the_truncation_claims():
    assert set(TRUNCATION_CLAIMS) <= set(VARIANTS["zeroed_truncation_bootstrap"].caught_by)
    checks = [node for node in checks_using(["gae_advantages"]) if node.split("::")[1] in TRUNCATION_CLAIMS]
    assert {node.split("::")[1] for node in _failing(outcomes_against(CLEANRL, checks))} == set(TRUNCATION_CLAIMS)


def _cleanrl_loop(rewards, values, dones, next_value, next_done, gamma, lambda_):
    """CleanRL's ppo.py advantage loop, line for line (dones[t] says the episode ended before step t)."""
    advantages, last_gae_lam = np.zeros_like(rewards), 0
    for t in reversed(range(len(rewards))):
        if t == len(rewards) - 1:
            next_non_terminal, next_values = 1 - next_done, next_value
        else:
            next_non_terminal, next_values = 1 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * next_values * next_non_terminal - values[t]
        advantages[t] = last_gae_lam = delta + gamma * lambda_ * next_non_terminal * last_gae_lam
    return advantages


def test_the_zoo_variant_is_cleanrls_loop_on_the_contracts_arguments():
    """Every cut inside the buffer is one of CleanRL's dones; its last row ends with next_done = terminated
    (a rollout whose last step a time limit cut stores the same masks as a buffer edge there)."""
    rng = np.random.default_rng(14)
    gamma, lambda_ = Fraction(9, 10), Fraction(3, 4)
    cleanrl = importlib.import_module(CLEANRL)
    for length in (1, 2, 7, 20):
        r, v, v_next, terminated, trace_cut = _rollout(rng, length, 3)
        dones = np.concatenate([np.zeros_like(trace_cut[:1]), trace_cut[:-1]])
        expected = _cleanrl_loop(r, v, dones, v_next[-1], terminated[-1], gamma, lambda_)
        assert np.array_equal(cleanrl.gae_advantages(r, v, v_next, terminated, trace_cut, gamma, lambda_), expected)


def _with_gae(monkeypatch: pytest.MonkeyPatch, name: str, gae_advantages) -> str:
    """A module importable as ``name``: impl with ``gae_advantages`` replaced."""
    module = types.ModuleType(name)
    module.__dict__.update({function: getattr(impl, function) for function in impl.__all__})
    module.__all__ = impl.__all__
    module.gae_advantages = gae_advantages
    monkeypatch.setitem(sys.modules, name, module)
    return name


def _results(claim_id: str, implementation: str) -> list[tuple[str, str, list[str]]]:
    """Each check of the claim run in this process: its kind, its status and the keys it got wrong."""
    entry = course_entry(claim_id)
    results = [run_check(entry, i, lookup(check.verifier), RunOptions(impl=implementation))
               for i, check in enumerate(entry.claim.checks)]
    return [(result.kind, result.status, [c["key"] for c in result.comparisons if not c["passed"]])
            for result in results]


def _rollout_only_gae(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """impl's GAE, refusing (AssertionError) any buffer no rollout stores."""
    terminated, cut = np.asarray(terminated_t) != 0, np.asarray(trace_cut_t) != 0
    assert np.all(cut[terminated]), "a termination that does not cut the trace"
    goes_on = ~cut[:-1]
    assert np.array_equal(np.asarray(v_tp1)[:-1][goes_on], np.asarray(v_t)[1:][goes_on]), \
        "V(s_{t+1}) of a step whose trace goes on differs from the next row's V(s_t)"
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, carry=carry)


@pytest.mark.parametrize("claim_id", FAST_GAE_CLAIMS)
def test_the_gae_claims_hand_gae_advantages_only_rollouts(monkeypatch, claim_id):
    name = _with_gae(monkeypatch, "rollout_only_gae", _rollout_only_gae)
    results = _results(claim_id, name)
    assert all(status in ("passed", "skipped") for _, status, _ in results), results


def _sb3_without_the_truncation_fold(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """SB3's loop without ``rewards += gamma * V(terminal_observation)``: one done flag, no bootstrap at a cut."""
    cut_not_terminal = (np.asarray(trace_cut_t) != 0) & (np.asarray(terminated_t) == 0)
    no_final_values = np.where(cut_not_terminal, 0, v_tp1)
    return sb3_gae.gae_advantages(r_t, v_t, no_final_values, terminated_t, trace_cut_t, gamma, lambda_, carry=carry)


def _recursion_discounted_by_gamma(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """Â_t = δ_t + γ Â_{t+1}: the λ of the recursion forgotten (a λ = 1 GAE whatever λ is)."""
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, 1, carry=carry)


def _bootstraps_at_terminals(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """The recursion cut right, but δ_t bootstraps from V(s_{t+1}) even at a true terminal."""
    never_terminal = np.zeros(np.shape(terminated_t), dtype=int)
    return impl.gae_advantages(r_t, v_t, v_tp1, never_terminal, trace_cut_t, gamma, lambda_, carry=carry)


@pytest.mark.parametrize(("wrong_gae", "claim_id", "expected"), [
    (_sb3_without_the_truncation_fold, "gae-recursion-equals-sum", [("property", "failed", ["holds"])]),
    (_recursion_discounted_by_gamma, "gae-recursion-equals-sum", [("property", "failed", ["holds"])]),
    (_sb3_without_the_truncation_fold, "gae-lambda-zero-is-td-error", [("property", "failed", ["holds"])]),
    (_bootstraps_at_terminals, "gae-lambda-zero-is-td-error", [("property", "failed", ["holds"])]),
    (_sb3_without_the_truncation_fold, "gae-four-events-table",
     [("exact", "failed", ["truncated_bootstraps", "buffer_edge_bootstraps"]), ("property", "failed", ["holds"])]),
    (_recursion_discounted_by_gamma, "gae-four-events-table",
     [("exact", "failed", ["joined_buffer_edge_continues_trace", "ordinary_continues_trace"]),
      ("property", "failed", ["holds"])]),
    (_bootstraps_at_terminals, "gae-four-events-table",
     [("exact", "failed", ["terminated_bootstraps"]), ("property", "failed", ["holds"])]),
])
def test_a_gae_wrong_on_rollouts_still_fails_the_claim(monkeypatch, wrong_gae, claim_id, expected):
    name = _with_gae(monkeypatch, wrong_gae.__name__.strip("_"), wrong_gae)
    # The symbolic checks prove the formula and never call the implementation.
    on_the_implementation = [result for result in _results(claim_id, name) if result[0] != "symbolic"]
    assert on_the_implementation == expected
