"""Steps 4.1.1 and 4.1.3: trajectories drawn by running the policy follow p_θ(τ), and J(θ) = E_{p_θ}[R(τ)].

Apart from ``verifiers.policy_gradient``, whose checks are about gradients: these are about the law
the rollouts follow and the objective the gradients are of, computed here from the MDP's tables.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field
from scipy.special import softmax

from claims_harness import Context, given, verifier
from verifiers._exact import MDPTables, exact_mdps
from verifiers._numeric import central_difference, rounding_bound
from verifiers._reach import reach_mdp
from verifiers.policy_gradient import (
    MDPExample,
    largest_return,
    objective_difference_bound,
    policy_kernel,
    reach_trajectories,
    reference_objective,
)


def _marginals(params: MDPExample) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(s_t = s, a_t = a) for t < T, shape [T, S, A], and P(s_T = s), shape [S], under p_θ, with the kernel P_θ.

    ρ is pushed through π_θ and the kernel P_θ (:func:`verifiers.policy_gradient.policy_kernel`).
    """
    pi = softmax(np.array(params.theta, dtype=float), axis=1)
    kernel = policy_kernel(np.array(params.P, dtype=float),
                           None if params.P_alt is None else np.array(params.P_alt, dtype=float), pi)
    state, joint = np.array(params.rho, dtype=float), []
    for _ in range(params.horizon):
        joint.append(state[:, None] * pi)
        state = np.einsum("sa,sat->t", joint[-1], kernel)
    return np.array(joint), state, kernel


@verifier(kind="montecarlo", uses=("sample_trajectories",), params=MDPExample)
def visit_frequencies_montecarlo(ctx: Context) -> dict[str, object]:
    """The share of impl's sampled trajectories with (s_t, a_t) = (s, a) at each step t < T, and with
    s_T = s, minus that probability under p_θ (:func:`_marginals`): one interval per entry, each
    share a mean of indicators of support width 1."""
    params = ctx.params
    joint, last, kernel = _marginals(params)
    n = ctx.samples_needed((0.0, 1.0))
    trajectories = ctx.impl.sample_trajectories(ctx.rng, params.mdp(), params.logits(), params.horizon, n)
    reach_trajectories(kernel, params.horizon, data="current")
    s_t, a_t = np.asarray(trajectories.s_t), np.asarray(trajectories.a_t)
    assert s_t.shape == (params.horizon + 1, n) and a_t.shape == (params.horizon, n), (s_t.shape, a_t.shape)

    def share_error(hits: np.ndarray, probability: float) -> object:
        return ctx.mean_estimate(hits.astype(float) - probability, (-probability, 1 - probability))

    n_states, n_actions = joint.shape[1:]
    return {
        "state_action_share_error": [[[share_error((s_t[t] == s) & (a_t[t] == a), joint[t, s, a])
                                       for a in range(n_actions)] for s in range(n_states)]
                                     for t in range(params.horizon)],
        "last_state_share_error": [share_error(s_t[-1] == s, last[s]) for s in range(n_states)],
        "trajectories": n,
    }


class UndiscountedExample(MDPExample):
    """An MDP example for the objective the text defines, the expected total reward (γ = 1), with dynamics
    that do not depend on θ (the central difference's bound assumes them)."""

    gamma: float = Field(1.0, ge=1, le=1, description="1: the objective called without a discount is undiscounted")
    P_alt: None = Field(None, description="none: the dynamics do not depend on θ")


@verifier(kind="exact", uses=("objective", "objective_gradient"), params=UndiscountedExample)
def objective_without_discount_exact(ctx: Context) -> dict[str, object]:
    """impl's ``objective`` and ``objective_gradient`` called with no discount, against the verifier's own
    J(θ) = Σ_τ p_θ(τ) R(τ) (undiscounted, by enumeration) and its central difference (step 1e-4):
    whether each is within its derived bound (the difference's truncation error plus rounding)."""
    params = ctx.params
    mdp, theta, horizon = params.mdp(), params.logits(), params.horizon
    # The undiscounted total the text defines: params.gamma is 1 (UndiscountedExample allows nothing else).
    reach_mdp(mdp.P, gamma=params.gamma, horizon=horizon)
    step = 1e-4
    reference = reference_objective(mdp, theta, horizon, 1.0)
    numeric = central_difference(lambda x: reference_objective(mdp, x, horizon, 1.0), theta, step)
    n_states, n_actions = theta.shape
    trajectories = n_states ** (horizon + 1) * n_actions**horizon
    rounding = rounding_bound(trajectories + horizon * (n_actions + 5), largest_return(mdp.R, horizon, 1.0))
    objective_gap = abs(float(ctx.impl.objective(mdp, theta, horizon)) - reference)
    gradient_gap = float(np.abs(np.asarray(ctx.impl.objective_gradient(mdp, theta, horizon)) - numeric).max())
    return {"objective_matches": objective_gap <= rounding,
            "gradient_matches": gradient_gap <= objective_difference_bound(mdp, horizon, 1.0, step) + rounding}


@verifier(kind="property", uses=("enumerate_trajectories",))
@given(exact_mdps())
def enumerated_probabilities_property(ctx: Context, example: tuple[MDPTables, np.ndarray, int]) -> None:
    """On random exact MDPs whose ρ and dynamics do not depend on θ, impl's enumeration lists every
    (s_0, a_0, ..., s_T) exactly once, with the reward R(s_t, a_t) at each step and the probability
    ρ(s_0) Π_t π(a_t|s_t) P(s_{t+1}|s_t, a_t) computed here, exactly; the probabilities sum to one."""
    mdp, pi, horizon = example
    n_states, n_actions = pi.shape
    reach_trajectories(mdp.P, horizon)
    paths = ctx.impl.enumerate_trajectories(mdp, pi, horizon)
    s_t, a_t, r_t = np.asarray(paths.s_t), np.asarray(paths.a_t), np.asarray(paths.r_t)
    count = n_states ** (horizon + 1) * n_actions**horizon
    assert s_t.shape == (horizon + 1, count) and a_t.shape == (horizon, count), (s_t.shape, a_t.shape)
    seen = {(tuple(s), tuple(a)) for s, a in zip(s_t.T.tolist(), a_t.T.tolist(), strict=True)}
    assert len(seen) == count, f"{count - len(seen)} trajectories listed twice"
    for m, (s, a) in enumerate(zip(s_t.T.tolist(), a_t.T.tolist(), strict=True)):
        law = mdp.rho[s[0]] * math.prod(pi[s[t], a[t]] * mdp.P[s[t], a[t], s[t + 1]] for t in range(horizon))
        assert paths.probability[m] == law, ((s, a), paths.probability[m], law)
        assert list(r_t[:, m]) == [mdp.R[s[t], a[t]] for t in range(horizon)], ((s, a), list(r_t[:, m]))
    assert sum(paths.probability) == 1, sum(paths.probability)
