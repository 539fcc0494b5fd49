"""A small tabular MDP with a finite horizon, a tabular softmax policy, and exact enumeration.

Arrays follow the syllabus's convention: ``P[s, a, s2]`` is the probability of moving to s2 after
action a in state s, ``R[s, a]`` the (deterministic) reward of that action, ``rho[s]`` the initial
distribution. The policy is π_θ(·|s) = softmax(θ[s]) with logits ``theta[s, a]``. A trajectory of
horizon T is τ = (s_0, a_0, r_1, s_1, ..., a_{T-1}, r_T, s_T) (module step 4.1.3), stored
time-major as ``s_t`` [T+1, ...], ``a_t`` [T, ...] and ``r_t`` [T, ...] with ``r_t[t]`` = r_{t+1}
= R[s_t, a_t], as in ``impl.returns``.

For the counterexample of step 4.1.3 the dynamics may depend on the policy's parameters: given a
second kernel ``P_alt``, the transition kernel is P_θ = (1 - β_s) P + β_s P_alt with the mixing
weight β_s = π_θ(0|s), an environment that reacts to how likely the agent is to pick action 0
(a learned or adversarial environment sharing the policy's parameters).

Enumeration visits all S^{T+1} A^T trajectories, so it is meant for a few states, actions and
steps; given a policy table and MDP arrays of ``fractions.Fraction`` it is exact.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .policies import softmax, tabular_softmax_score
from .returns import discounted_returns


class TabularMDP(NamedTuple):
    """A finite MDP; functions read only these four attributes, so any object with them will do.

    Attributes:
      P: transition probabilities, shape [S, A, S]; each P[s, a] sums to one.
      R: rewards, shape [S, A].
      rho: initial state distribution, shape [S].
      P_alt: None for dynamics independent of θ; else a second kernel [S, A, S], mixed in with
        weight π_θ(0|s) (see the module docstring).
    """

    P: np.ndarray
    R: np.ndarray
    rho: np.ndarray
    P_alt: np.ndarray | None = None


class Trajectories(NamedTuple):
    """Trajectories stored time-major, with their probabilities when enumerated.

    Attributes:
      s_t: states s_0..s_T, shape [T+1, M].
      a_t: actions a_0..a_{T-1}, shape [T, M].
      r_t: rewards r_1..r_T, shape [T, M].
      probability: p_θ(τ) of each trajectory, shape [M] (from enumeration; None when sampled).
    """

    s_t: np.ndarray
    a_t: np.ndarray
    r_t: np.ndarray
    probability: np.ndarray | None = None


def transition_kernel(mdp: TabularMDP, pi_sa: ArrayLike) -> np.ndarray:
    """P_θ[s, a, s2]: ``mdp.P`` itself, or (1 - π(0|s)) P + π(0|s) P_alt when the dynamics depend on θ.

    Args:
      mdp: the MDP.
      pi_sa: the policy table π_θ(a|s), shape [S, A]; object arrays of fractions stay exact.

    Returns:
      the transition kernel under this policy, shape [S, A, S].
    """
    if mdp.P_alt is None:
        return np.asarray(mdp.P)
    beta = np.asarray(pi_sa)[:, 0][:, None, None]
    return (1 - beta) * np.asarray(mdp.P) + beta * np.asarray(mdp.P_alt)


def enumerate_trajectories(mdp: TabularMDP, pi_sa: ArrayLike, horizon: int) -> Trajectories:
    """Every trajectory of length ``horizon`` with its probability ρ(s_0) Π_t π(a_t|s_t) P_θ(s_{t+1}|s_t, a_t).

    Args:
      mdp: the MDP.
      pi_sa: the policy table π_θ(a|s), shape [S, A] (``softmax(theta)``, or exact fractions).
      horizon: T >= 1.

    Returns:
      all M = S^{T+1} A^T trajectories, including those of probability zero, time-major.
    """
    pi_sa = np.asarray(pi_sa)
    n_states, n_actions = pi_sa.shape
    kernel = transition_kernel(mdp, pi_sa)
    ranges = [range(n_states)] + [range(n_actions), range(n_states)] * horizon
    path = np.array(list(itertools.product(*ranges))).T
    s_t, a_t = path[0::2], path[1::2]
    probability = np.asarray(mdp.rho)[s_t[0]]
    for t in range(horizon):
        probability = probability * pi_sa[s_t[t], a_t[t]] * kernel[s_t[t], a_t[t], s_t[t + 1]]
    return Trajectories(s_t, a_t, np.asarray(mdp.R)[s_t[:-1], a_t], probability)


def _draw(rng: np.random.Generator, probabilities: np.ndarray, rows: np.ndarray | int, out: np.ndarray) -> None:
    """Write to ``out`` one index per draw, drawn from row ``rows[i]`` (or row ``rows`` for all) of ``probabilities``.

    By inversion of the row's CDF at a uniform u: the draw is the number of the CDF's first K - 1
    entries at or below u (so a CDF whose last entry round-off leaves a hair below u still gives
    the last index). The CDF is summed once per row of the table [R, K] and compared one entry at
    a time, a gathered column per entry rather than a whole gathered row per draw: several times
    faster, and the same draws.
    """
    cdf = np.cumsum(probabilities, axis=-1)
    u = rng.random(len(out))
    out[...] = 0
    for k in range(probabilities.shape[-1] - 1):
        out += cdf[:, k].take(rows) <= u


def sample_trajectories(rng: np.random.Generator, mdp: TabularMDP, theta: ArrayLike, horizon: int, n: int
                        ) -> Trajectories:
    """Draw ``n`` independent trajectories of the softmax policy with logits ``theta``.

    Args:
      rng: the source of randomness.
      mdp: the MDP.
      theta: logits, shape [S, A].
      horizon: T >= 1.
      n: number of trajectories.

    Returns:
      ``s_t`` [T+1, n], ``a_t`` [T, n], ``r_t`` [T, n]; ``probability`` is None.
    """
    pi_sa = softmax(theta)
    kernel = transition_kernel(mdp, pi_sa)
    s_t = np.empty((horizon + 1, n), dtype=int)
    a_t = np.empty((horizon, n), dtype=int)
    # s * A + a: the row of P(. | s, a) in the kernel's [S * A, S] view, and the index of R[s, a] in R's flat view.
    state_action = np.empty((horizon, n), dtype=int)
    _draw(rng, np.asarray(mdp.rho, dtype=float)[None, :], 0, s_t[0])
    for t in range(horizon):
        _draw(rng, pi_sa, s_t[t], a_t[t])
        state_action[t] = s_t[t] * pi_sa.shape[1] + a_t[t]
        _draw(rng, kernel.reshape(-1, kernel.shape[-1]), state_action[t], s_t[t + 1])
    return Trajectories(s_t, a_t, np.asarray(mdp.R).ravel().take(state_action))


def trajectory_score(mdp: TabularMDP, theta: ArrayLike, s_t: ArrayLike, a_t: ArrayLike) -> np.ndarray:
    """∇_θ log p_θ(τ) for trajectories of the softmax policy with logits ``theta``.

    With dynamics independent of θ this is Σ_t ∇_θ log π_θ(a_t|s_t) (module step 4.1.3). With
    ``P_alt`` it adds Σ_t ∇_θ log P_θ(s_{t+1}|s_t, a_t), where
    ∇_θ P_θ(s2|s, a) = (P_alt - P)[s, a, s2] ∇_θ π_θ(0|s) and ∇_θ π_θ(0|s) = π_θ(0|s) ∇_θ log π_θ(0|s).

    Args:
      mdp: the MDP.
      theta: logits, shape [S, A].
      s_t: states s_0..s_T, shape [T+1, ...].
      a_t: actions a_0..a_{T-1}, shape [T, ...]; the trajectories must have positive probability.

    Returns:
      the score, shape [..., S, A].
    """
    s_t, a_t = np.asarray(s_t), np.asarray(a_t)
    score = tabular_softmax_score(theta, s_t[:-1], a_t).sum(axis=0)
    if mdp.P_alt is None:
        return score
    pi_sa = softmax(theta)
    kernel = transition_kernel(mdp, pi_sa)
    state, action, next_state = s_t[:-1], a_t, s_t[1:]
    change = (np.asarray(mdp.P_alt) - np.asarray(mdp.P))[state, action, next_state]
    d_log_kernel = change / kernel[state, action, next_state] * pi_sa[state, 0]
    d_beta = tabular_softmax_score(theta, state, np.zeros_like(state))
    return score + (d_log_kernel[..., None, None] * d_beta).sum(axis=0)


def objective(mdp: TabularMDP, theta: ArrayLike, horizon: int, gamma: float = 1.0) -> float:
    """J(θ) = E_{τ~p_θ}[Σ_{t=0}^{T-1} γ^t r_{t+1}], exactly, by enumerating every trajectory.

    Args:
      mdp: the MDP.
      theta: logits, shape [S, A].
      horizon: T >= 1.
      gamma: the discount γ; 1 gives the expected total reward R(τ) of step 4.1.1.
    """
    paths = enumerate_trajectories(mdp, softmax(theta), horizon)
    return float(paths.probability @ discounted_returns(paths.r_t, gamma)[0])


def objective_gradient(mdp: TabularMDP, theta: ArrayLike, horizon: int, gamma: float = 1.0) -> np.ndarray:
    """∇_θ J(θ) = Σ_τ p_θ(τ) R_γ(τ) ∇_θ log p_θ(τ), exactly, by enumerating every trajectory.

    The log-derivative identity (module step 4.1.2) over the finite set of trajectories, with
    the full ∇ log p_θ(τ) of :func:`trajectory_score`, so it is the true gradient also when the
    dynamics depend on θ. Trajectories of probability zero contribute nothing and are skipped.

    Args:
      mdp: the MDP.
      theta: logits, shape [S, A].
      horizon: T >= 1.
      gamma: the discount γ of the objective.

    Returns:
      the gradient, shape [S, A].
    """
    paths = enumerate_trajectories(mdp, softmax(theta), horizon)
    possible = paths.probability > 0
    weight = paths.probability[possible] * discounted_returns(paths.r_t[:, possible], gamma)[0]
    score = trajectory_score(mdp, theta, paths.s_t[:, possible], paths.a_t[:, possible])
    return np.tensordot(weight, score, axes=1)
