"""Lesson 4.3's statements that the first checks of the lesson tested less than they say (steps 4.3.1-4.3.5).

Step 4.3.1: explained variance as the share of the targets' variance a critic accounts for, not
only its two endpoints. Step 4.3.2: how large a long target's variance can get, not only that it is
positive, and that a random next state alone makes it noisy where a deterministic one does not.
Step 4.3.3: where the bootstrapped tail at a rollout's edge matters most (short buffers,
long episodes). Step 4.3.4: that the state at a time-limit truncation has a continuation value of its
own. Step 4.3.5: what using each batch once buys (the step is the collecting policy's gradient in
expectation, and a reused batch no longer gives the changed policy's), and what PPO's clipping buys
when one batch is reused for several epochs.
"""

from __future__ import annotations

import functools
import math
from collections import namedtuple
from fractions import Fraction

import numpy as np
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions
from verifiers._numeric import as_written, assert_close, log_softmax, rounding_bound
from verifiers._reach import reach_bandit, reach_mdp
from verifiers.actor_critic import (
    Chain,
    Corridor,
    _chain_estimates,
    _chain_paths,
    _collect,
    _mean_and_variance,
    _start,
    chain_critic,
    chain_values,
    corridor,
    reach_chain,
)
from verifiers.syllabus_ppo import ClippedEpochs
from verifiers.tabular import exact_policy_values

# ------------------------------------------------------------------ 4.3.1: explained variance is a share


def _share_batches() -> st.SearchStrategy:
    """Targets and a feature, both eighths in [-10, 10], and a shrinking factor α = k/16."""
    return st.integers(min_value=3, max_value=40).flatmap(
        lambda n: st.tuples(st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                            st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                            st.integers(0, 16)))


@verifier(kind="property", uses=("explained_variance",))
@given(_share_batches())
def explained_variance_share_property(ctx: Context, batch: tuple) -> None:
    """On random targets V̂, impl's explained variance is the share of the targets' variance the
    critic accounts for, between the endpoints as well as at them:

    - for the least-squares affine fit V = a + b x of V̂ on a random feature x (computed here), whose
      residual is uncorrelated with it, Var[V̂] = Var[V] + Var[V̂ - V], and the explained variance must
      be Var[V] / Var[V̂], the share of the targets' variance the predictions carry;
    - for the shrunk predictions V = mean(V̂) + α (V̂ - mean(V̂)), it must be 1 - (1 - α)^2: the
      share left unexplained is Var[V̂ - V] / Var[V̂], not 1 - Var[V] / Var[V̂] = 1 - α^2.

    Both are computed in floats from eighths; a variance ratio of numbers bounded by M over a spread
    σ rounds by at most the bound of 8N operations on (M / σ)^2, as in explained_variance_property.
    """
    targets, features, sixteenths = batch
    y = np.array(targets, dtype=float) / 8
    x = np.array(features, dtype=float) / 8
    spread = float(np.std(y))
    if spread == 0:
        return
    scale = (float(np.abs(y).max()) + 1) / spread
    bound = rounding_bound(8 * len(y), scale**2)
    if np.std(x) > 0:
        slope = float(np.mean((x - x.mean()) * (y - y.mean())) / np.var(x))
        fit = y.mean() + slope * (x - x.mean())
        share = float(np.var(fit) / np.var(y))
        fit_bound = rounding_bound(8 * len(y), ((float(np.abs(y).max()) + float(np.abs(fit).max()) + 1)
                                                / spread) ** 2)
        observed = ctx.impl.explained_variance(fit, y.copy())
        assert_close(observed, share, fit_bound, "explained variance of the least-squares fit against Var[V] / Var[V̂]")
    alpha = sixteenths / 16
    shrunk = y.mean() + alpha * (y - y.mean())
    observed = ctx.impl.explained_variance(shrunk, y.copy())
    assert_close(observed, 1 - (1 - alpha) ** 2, bound, f"explained variance of the predictions shrunk by α = {alpha}")


# ------------------------------------------------------------------ 4.3.2: a long target's variance grows with it


class GrowingChain(NoParams):
    """A chain whose every step's reward is random, and the episode lengths to compare."""

    chain: Chain
    lengths: list[int] = Field(min_length=2, description="episode lengths, each at most 6 (Chain's limit)")


@verifier(kind="exact", uses=("n_step_advantages",), params=GrowingChain)
def long_target_variance_grows_exact(ctx: Context) -> dict[str, object]:
    """For each episode length L, the variance at s_0 of impl's Monte Carlo estimate (n = L, to the
    episode's end) and of its one-step estimate (n = 1), over every episode enumerated exactly, and
    their ratio. With independent per-step rewards and γ = 1 the long target's variance is the sum
    of the L steps' variances: L times the one-step target's when the critic errs by a constant."""
    observed: dict[str, list[object]] = {"long_target_variance_by_length": [], "one_step_variance_by_length": [],
                                         "ratio_by_length": []}
    for length in ctx.params.lengths:
        chain = Chain(**{**ctx.params.chain.model_dump(), "length": length})
        reach_chain(chain, advantages="exact" if chain.critic_error == 0 else "estimated")
        rewards, probability = _chain_paths(chain, None)
        critic = chain_critic(chain, chain_values(chain))
        _, long = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, length))
        _, short = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, 1))
        observed["long_target_variance_by_length"].append(long)
        observed["one_step_variance_by_length"].append(short)
        observed["ratio_by_length"].append(long / short if short else None)
    return observed


class EpisodicMDP(NoParams):
    """A small episodic MDP: P[s][a][s2], R[s][a] and π[s][a], a start state, and an absorbing terminal state."""

    P: list[list[list[float]]] = Field(min_length=2, description="P[s][a][s2]; the terminal state's row absorbs")
    R: list[list[float]] = Field(min_length=2, description="R[s][a], the reward of taking a in s (0 in the terminal)")
    pi: list[list[float]] = Field(min_length=2, description="π(a|s), the policy that collects the episodes")
    start: int = Field(ge=0, description="the state every episode starts from")
    terminal: int = Field(ge=0, description="the absorbing terminal state, worth 0")


class TwoEnvironments(NoParams):
    """The same task with deterministic and with stochastic transitions, its discount, and its episodes' length."""

    deterministic: EpisodicMDP
    stochastic: EpisodicMDP
    gamma: float = Field(gt=0, le=1, description="the discount γ")
    horizon: int = Field(ge=1, le=8, description="decisions of every episode: the terminal is reached after exactly "
                                                 "this many")


def _episodes(mdp: EpisodicMDP, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every episode of ``horizon`` decisions from the start state, exactly: states [horizon + 1, M], actions
    [horizon, M], their probabilities [M], and the MDP's P, R, π as exact arrays."""
    P, R, pi = (as_fractions(table) for table in (mdp.P, mdp.R, mdp.pi))
    paths = [((mdp.start,), (), Fraction(1))]
    for _ in range(horizon):
        paths = [(states + (following,), actions + (a,), probability * pi[states[-1], a] * P[states[-1], a, following])
                 for states, actions, probability in paths for a in range(pi.shape[1]) for following in range(len(P))
                 if pi[states[-1], a] * P[states[-1], a, following]]
    if any(states[-1] != mdp.terminal or mdp.terminal in states[:-1] for states, _, _ in paths):
        raise ValueError(f"every episode must reach the terminal state {mdp.terminal} after exactly {horizon} "
                         "decisions")
    states = np.array([path[0] for path in paths]).T
    actions = np.array([path[1] for path in paths]).T
    return states, actions, np.array([path[2] for path in paths], dtype=object), (P, R, pi)


@verifier(kind="exact", uses=("n_step_advantages",), params=TwoEnvironments)
def long_target_noise_by_transitions_exact(ctx: Context) -> dict[str, object]:
    """The variance of the Monte Carlo target (impl's n-step estimate with n = horizon, to the episode's end)
    and of the one-step target at the start state, each plus V^π(s_0), over every episode enumerated
    exactly, in the same task with deterministic and with stochastic transitions: the randomness of the
    long target here is the environment's next states alone (the policy and the rewards of each (s, a)
    are fixed).

    V^π is solved here on the live states with sympy (the terminal is worth 0); the critic is exact, so
    each target is unbiased and only its noise differs.
    """
    params = ctx.params
    gamma = as_written(params.gamma)
    observed: dict[str, object] = {}
    for name in ("deterministic", "stochastic"):
        mdp = getattr(params, name)
        s, a, probability, (P, R, pi) = _episodes(mdp, params.horizon)
        reach_mdp(P, gamma=gamma, horizon=params.horizon, advantages="exact")
        live = [state for state in range(len(P)) if state != mdp.terminal]
        values = np.zeros(len(P), dtype=object) + Fraction(0)
        values[live] = exact_policy_values(P[np.ix_(live, range(P.shape[1]), live)], R[live], pi[live], gamma)
        terminated = (s[1:] == mdp.terminal).astype(int)
        observed[f"{name}_episodes"] = len(probability)
        for horizon, n in (("long", params.horizon), ("one_step", 1)):
            estimate = ctx.impl.n_step_advantages(R[s[:-1], a], values[s[:-1]], values[s[1:]], terminated, terminated,
                                                  gamma, n)[0]
            _, variance = _mean_and_variance(probability, estimate + values[mdp.start])
            observed[f"{name}_{horizon}_target_variance"] = variance
    observed["stochastic_long_minus_one_step_variance"] = (observed["stochastic_long_target_variance"]
                                                           - observed["stochastic_one_step_target_variance"])
    return observed


# ------------------------------------------------------------------ 4.3.3: where the edge's tail weighs most


def _tail_coefficients(ctx: Context, length: int, gamma: float, lambda_: float, terminal_at_end: bool,
                       rng: np.random.Generator) -> np.ndarray:
    """∂Â_t / ∂V(s_T) of impl's batch GAE on one buffer of ``length`` steps of one episode, by raising
    the last row's V(s_{t+1}) by 1 (Â is affine in it). The buffer is one a rollout stores: every row
    but the last continues into the next (its V(s_{t+1}) is the next row's V(s_t)), and the last row
    cuts the trace: a buffer edge, or the episode's true terminal when ``terminal_at_end``."""
    r, v = rng.normal(size=length), rng.normal(size=length)
    v_next = np.append(v[1:], rng.normal())
    terminated, trace_cut = np.zeros(length), np.zeros(length)
    trace_cut[-1] = 1
    terminated[-1] = float(terminal_at_end)
    raised = v_next.copy()
    raised[-1] += 1
    base = ctx.impl.gae_advantages(r, v, v_next, terminated, trace_cut, gamma, lambda_)
    moved = ctx.impl.gae_advantages(r, v, raised, terminated, trace_cut, gamma, lambda_)
    return np.asarray(moved, dtype=float) - np.asarray(base, dtype=float)


def _tail_bound(length: int) -> float:
    # Â_t sums at most T terms of standard normal draws (bounded by 10 in practice, with margin) and the raised 1.
    return rounding_bound(8 * length, 30.0 * length)


def _edge_tail_draws() -> st.SearchStrategy:
    # γ and λ in [1/2, 1] (sixteenths; γ = λ = 1 makes γλ = 1), a buffer length, the number of buffers an
    # episode spans, a seed. The smallest tail coefficient, γ (γλ)^(T-1) >= 1e-8, stays far above float rounding,
    # so a coefficient read as zero is zero.
    return st.tuples(st.integers(8, 16), st.integers(8, 16), st.integers(1, 12), st.integers(1, 5),
                     st.integers(0, 2**32 - 1))


@verifier(kind="property", uses=("gae_advantages",))
@given(_edge_tail_draws())
def edge_tail_weight_property(ctx: Context, draw: tuple) -> None:
    """Where the bootstrapped tail at a rollout's edge weighs most, read off impl's batch GAE.

    - Short buffers: for one episode that goes on past a buffer of T steps, the mean over the
      buffer's steps of ∂Â_t/∂V(s_T), the weight the critic's tail carries, is larger for T than
      for T + 1 (it is γ/T Σ_{k<T} (γλ)^k, which falls with T when γλ < 1; with γ = λ = 1 it is 1 at
      every T, and only the share of steps below says where the tail weighs most), and every step's
      coefficient is positive: no estimate of the buffer is free of the tail.
    - Long episodes: an episode of k T steps ending in a true terminal, collected in k consecutive
      buffers of T, has a share of (k - 1)/k of its steps whose estimates carry an edge's tail (all
      but the last buffer's); an episode that fits in one buffer (k = 1) has none, and k + 1
      buffers' worth has a larger share than k.
    """
    gamma_16, lambda_16, length, pieces, seed = draw
    gamma, lambda_ = gamma_16 / 16, lambda_16 / 16
    # Buffers of random values (a critic's estimates) cut from episodes of k and k + 1 buffers' length.
    reach(discount=gamma, horizon=[pieces * length, (pieces + 1) * length], advantages="estimated")
    rng = np.random.default_rng(seed)
    means = []
    for size in (length, length + 1):
        coefficients = _tail_coefficients(ctx, size, gamma, lambda_, False, rng)
        assert np.all(coefficients > _tail_bound(size)), ("a step without the edge's tail", size, coefficients)
        means.append(float(coefficients.mean()))
    margin = means[0] - means[1]
    if gamma * lambda_ < 1:
        assert margin > 2 * _tail_bound(length + 1), ("the tail does not weigh more in the shorter buffer", means)
    else:
        assert_close(margin, 0.0, 2 * _tail_bound(length + 1), "with γλ = 1, the shorter buffer's extra mean tail")
    shares = []
    for k in (pieces, pieces + 1):
        carrying = 0
        for piece in range(k):
            last = piece == k - 1
            coefficients = _tail_coefficients(ctx, length, gamma, lambda_, last, rng)
            carrying += int(np.sum(np.abs(coefficients) > _tail_bound(length)))
            if last:
                assert_close(coefficients, 0.0, _tail_bound(length), "the tail coefficients before a terminal")
        shares.append(Fraction(carrying, k * length))
    assert shares == [Fraction(k - 1, k) for k in (pieces, pieces + 1)], ("share of steps with a tail", shares)
    assert shares[1] > shares[0], shares


# ------------------------------------------------------------------ 4.3.4: a truncated state's continuation value


def policy_values(theta: np.ndarray, mdp: dict[str, np.ndarray], gamma: float) -> np.ndarray:
    """V^{π_θ} of the untruncated discounted task, from (I - γ P_π) V = R_π (the goal absorbs with reward 0)."""
    pi = np.exp(log_softmax(theta))
    transition = np.einsum("sa,sat->st", pi, mdp["P"])
    return np.linalg.solve(np.eye(len(pi)) - gamma * transition, (pi * mdp["R"]).sum(axis=1))


@verifier(kind="exact", uses=("collect_rollout",), params=Corridor)
def truncation_continuation_value_exact(ctx: Context) -> dict[str, object]:
    """The states at which impl's rollout on the corridor cuts an episode by its time limit, and
    their value under the collecting policy in the untruncated task, solved here.

    A step is a truncation when the time limit, counted here from each reset, is reached there, the
    rollout does not flag it terminated and cuts its trace. The continuation value of its last
    observation s_{t+1} is V^π(s_{t+1}): what the episode would still earn had the limit not cut it.
    """
    params = ctx.params
    mdp = corridor(params)
    theta, phi = _start(mdp, ctx.rng)
    # Episodes cut at the time limit, valued in the untruncated task under the policy that collected them.
    reach_mdp(mdp["P"], gamma=params.gamma, horizon=[params.time_limit, math.inf], data="current")
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    shape = (params.n_steps, params.n_envs)
    reached_goal = mdp["terminal"][rollout.s_tp1]
    limit = np.zeros(shape, dtype=bool)
    elapsed = np.zeros(params.n_envs, dtype=int)
    for t in range(params.n_steps):
        elapsed += 1
        limit[t] = ~reached_goal[t] & (elapsed >= params.time_limit)
        elapsed[reached_goal[t] | limit[t]] = 0
    truncated = limit & (np.asarray(rollout.terminated_t) == 0) & (np.asarray(rollout.trace_cut_t) != 0)
    values = policy_values(theta, mdp, params.gamma)
    continuation = values[rollout.s_tp1[truncated]]
    # A linear solve of n equations on rewards of size |R|, with the discount's condition (1 + γ)/(1 - γ).
    largest = float(np.abs(mdp["R"]).max()) / (1 - params.gamma)
    bound = rounding_bound(8 * len(values) ** 3 + 8, (1 + params.gamma) / (1 - params.gamma) * largest)
    return {"truncations": int(truncated.sum()),
            "truncated_states_are_not_terminal": bool(not np.any(reached_goal[truncated])),
            "smallest_continuation_value": float(np.abs(continuation).min()) if continuation.size else 0.0,
            "continuation_values_exceed_rounding": bool(continuation.size and np.all(np.abs(continuation) > bound)),
            "rounding_bound": bound}


# ------------------------------------------------------------------ 4.3.5: what a single use of each batch buys


# The discount of the one-step iterations below: an episode of one step ends before any discounting.
ONE_STEP_DISCOUNT = 1.0


# Step 4.3.5's rollout, as fields: it reaches the implementation as data, built there as a named tuple of them.
OneStepRollout = namedtuple("OneStepRollout", ["s_t", "a_t", "log_pi_old_t", "r_t", "s_tp1", "v_t", "v_tp1",
                                               "terminated_t", "trace_cut_t"])


def _one_step_rollout(state: int, action: int, reward: float, value: float, log_pi: float, terminal: int
                      ) -> OneStepRollout:
    """One transition into the terminal state, shaped [1, 1], with the fields of step 4.3.5's rollout."""
    one = np.ones((1, 1))
    return OneStepRollout(s_t=np.full((1, 1), state), a_t=np.full((1, 1), action), log_pi_old_t=log_pi * one,
                           r_t=reward * one, s_tp1=np.full((1, 1), terminal), v_t=value * one, v_tp1=0 * one,
                           terminated_t=one.copy(), trace_cut_t=one.copy())


def _policy_gradient(theta: np.ndarray, rewards: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """∇_θ J for J = Σ_s ρ(s) Σ_a π_θ(a|s) R(s, a), one-step episodes: ρ(s) π(b|s) (R(s, b) - Σ_a π(a|s) R(s, a))."""
    pi = np.exp(log_softmax(theta))
    return rho[:, None] * pi * (rewards - (pi * rewards).sum(axis=1, keepdims=True))


def _old_data_step(theta: np.ndarray, rewards: np.ndarray, phi: np.ndarray, rho: np.ndarray, sampling: np.ndarray
                   ) -> np.ndarray:
    """Σ_s ρ(s) Σ_a sampling(a|s) (R(s, a) - φ(s)) (e_a - π_θ(·|s)), row by row: the expected policy-gradient
    step at θ on one-step data drawn from ``sampling``, written out here; ∇J(θ) when ``sampling`` is π_θ."""
    pi = np.exp(log_softmax(theta))
    weighted = sampling * (rewards - phi[:, None])
    return rho[:, None] * (weighted - weighted.sum(axis=1, keepdims=True) * pi)


def _expected_step(ctx: Context, theta: np.ndarray, phi: np.ndarray, rewards: np.ndarray, rho: np.ndarray,
                   sampling: np.ndarray, actor_lr: float, data: str) -> np.ndarray:
    """E[θ' - θ] / lr of impl's iteration on a batch of one transition drawn from ``sampling`` (π of the
    collecting policy), every (s, a) enumerated with probability ρ(s) sampling(a|s). ``data`` says whose
    policy ``sampling`` is, relative to θ's: the current one, or an old one θ has moved from."""
    n_states, n_actions = rewards.shape
    # One-step episodes from n_states start states; the advantage r - φ(s) is handed a drawn critic's value.
    reach(states=n_states, actions=n_actions, horizon=1, discount=ONE_STEP_DISCOUNT, data=data,
          advantages="estimated")
    full_theta = np.vstack([theta, np.zeros((1, n_actions))])
    full_phi = np.append(phi, 0.0)
    log_sampling = np.log(sampling)
    expected = np.zeros_like(full_theta)
    for s in range(n_states):
        for a in range(n_actions):
            rollout = _one_step_rollout(s, a, rewards[s, a], phi[s], log_sampling[s, a], n_states)
            stepped, _ = ctx.impl.actor_critic_iteration(full_theta, full_phi, rollout, ONE_STEP_DISCOUNT, 1.0,
                                                         actor_lr, 0.5, normalize=False)
            expected += rho[s] * sampling[s, a] * (np.asarray(stepped, dtype=float) - full_theta)
    assert not np.any(expected[-1]), "the terminal state's logits moved"
    return expected[:-1] / actor_lr


def _step_bound(rewards: np.ndarray, phi: np.ndarray, theta: np.ndarray, actor_lr: float) -> float:
    """Rounding of an enumerated mean of S·A steps, each of size lr (|R| + |φ|) on logits of size |θ|, divided by lr."""
    magnitude = (float(np.abs(theta).max()) / actor_lr + float(np.abs(rewards).max()) + float(np.abs(phi).max()))
    return rounding_bound(16 * rewards.size, magnitude)


@functools.cache
def _one_step_problems() -> st.SearchStrategy:
    def problem(drawn: tuple) -> dict[str, np.ndarray | float]:
        n_states, n_actions, rewards, logits, values, lr = drawn
        return {"rewards": np.array(rewards[:n_states * n_actions], dtype=float).reshape(n_states, n_actions) / 8,
                "theta": np.array(logits[:n_states * n_actions], dtype=float).reshape(n_states, n_actions) / 8,
                "phi": np.array(values[:n_states], dtype=float) / 8, "actor_lr": lr / 16}

    return st.tuples(st.integers(1, 3), st.integers(2, 3), st.lists(st.integers(-80, 80), min_size=9, max_size=9),
                     st.lists(st.integers(-24, 24), min_size=9, max_size=9),
                     st.lists(st.integers(-80, 80), min_size=3, max_size=3), st.integers(1, 32)).map(problem)


@verifier(kind="property", uses=("actor_critic_iteration",))
@given(_one_step_problems())
def single_use_step_property(ctx: Context, problem: dict) -> None:
    """On random one-step problems (1 to 3 equally likely start states, 2 or 3 actions, rewards R,
    a tabular softmax actor θ and any critic φ), impl's actor step on a batch collected by the policy
    it updates is, in expectation over the batch, lr ∇J(θ): every (s, a) is enumerated with its
    probability ρ(s) π_θ(a|s), the batch is one transition into the terminal state (Â = r - φ(s)),
    and ∇J is written out here. Unnormalised advantages: a batch of one sample has no spread.

    Once the policy has moved to θ_1 = θ + lr ∇J(θ), a step at θ_1 on the old batch (drawn from π_θ) is
    in expectation E_{π_θ}[(r - φ(s)) ∇ log π_θ1(a|s)], written out here: the old data's average, not
    ∇J(θ_1), from which it differs by Σ_s ρ(s) Σ_a (π_θ - π_θ1)(a|s) (R(s, a) - φ(s)) ∇ log π_θ1(a|s);
    a step on a fresh batch drawn from π_θ1 is lr ∇J(θ_1) again."""
    rewards, theta, phi, lr = (problem[k] for k in ("rewards", "theta", "phi", "actor_lr"))
    rho = np.full(len(rewards), 1 / len(rewards))
    pi = np.exp(log_softmax(theta))
    gradient = _policy_gradient(theta, rewards, rho)
    assert_close(_expected_step(ctx, theta, phi, rewards, rho, pi, lr, "current"), gradient,
                 _step_bound(rewards, phi, theta, lr), "the expected step against the collecting policy's gradient")
    changed = theta + lr * gradient
    bound = _step_bound(rewards, phi, changed, lr)
    reused = _expected_step(ctx, changed, phi, rewards, rho, pi, lr, "old")
    assert_close(reused, _old_data_step(changed, rewards, phi, rho, pi), bound,
                 "a reused batch's expected step against the old data's average")
    fresh = _expected_step(ctx, changed, phi, rewards, rho, np.exp(log_softmax(changed)), lr, "current")
    assert_close(fresh, _policy_gradient(changed, rewards, rho), bound,
                 "a fresh batch's expected step against the changed policy's gradient")


class OneStepBatch(NoParams):
    """One-step episodes from equally likely start states, a tabular actor and critic, and a step size."""

    rewards: list[list[float]] = Field(min_length=1, description="R[s][a]")
    theta: list[list[float]] = Field(min_length=1, description="the collecting actor's logits θ[s][a]")
    critic: list[float] = Field(min_length=1, description="V_φ(s), one per start state")
    actor_lr: float = Field(gt=0)


@verifier(kind="exact", uses=("actor_critic_iteration",), params=OneStepBatch)
def reused_batch_exact(ctx: Context) -> dict[str, object]:
    """A batch used once, and the same batch used again after the policy changed.

    The policy changes from θ to θ_1 = θ + lr ∇J(θ) (the expected first step). A second step of impl's
    iteration at θ_1 on transitions drawn from π_θ (the old batch again) is compared with lr ∇J(θ_1),
    and so is a step at θ_1 on transitions drawn from π_θ1 (a fresh batch). Each is an expectation
    over the batch, enumerated in floats; a gap above the rounding bound is a bias.
    """
    params = ctx.params
    rewards = np.array(params.rewards, dtype=float)
    theta = np.array(params.theta, dtype=float)
    phi = np.array(params.critic, dtype=float)
    if theta.shape != rewards.shape or phi.shape != rewards.shape[:1]:
        raise ValueError(f"theta must be shaped like rewards {rewards.shape} and critic have {len(rewards)} values")
    rho = np.full(len(rewards), 1 / len(rewards))
    lr = params.actor_lr
    old_pi = np.exp(log_softmax(theta))
    first = _expected_step(ctx, theta, phi, rewards, rho, old_pi, lr, "current")
    changed = theta + lr * _policy_gradient(theta, rewards, rho)
    new_pi = np.exp(log_softmax(changed))
    target = _policy_gradient(changed, rewards, rho)
    reused = _expected_step(ctx, changed, phi, rewards, rho, old_pi, lr, "old")
    fresh = _expected_step(ctx, changed, phi, rewards, rho, new_pi, lr, "current")
    bound = _step_bound(rewards, phi, changed, lr)
    gaps = {"single_use": float(np.abs(first - _policy_gradient(theta, rewards, rho)).max()),
            "reused": float(np.abs(reused - target).max()), "fresh": float(np.abs(fresh - target).max())}
    return {"single_use_step_is_the_gradient": gaps["single_use"] <= bound,
            "reused_batch_step_is_the_new_gradient": gaps["reused"] <= bound,
            "fresh_batch_step_is_the_new_gradient": gaps["fresh"] <= bound,
            "policy_change": float(np.abs(new_pi - old_pi).max()),
            **{f"{name}_gap": gap for name, gap in gaps.items()}, "rounding_bound": bound}


@verifier(kind="exact", uses=("ppo_clip_objective_grad", "surrogate_objective_grad"), params=ClippedEpochs)
def ppo_reuse_epochs_exact(ctx: Context) -> dict[str, object]:
    """One batch reused for several epochs of gradient ascent on the shared logits, once on PPO's
    clipped objective and once on the plain surrogate r_t Â_t, through impl's per-sample derivatives
    with respect to log π(a_t); the ratios, softmax scores and KL(π_old || π) are computed here.

    Reported after each number of epochs: the exact KL of each, and the first epoch's steps (at
    r_t = 1 both objectives give the policy-gradient step, so PPO's first pass over the batch is the
    ordinary one; only the later passes differ).
    """
    params = ctx.params
    pi_old = np.array(params.pi_old, dtype=float)
    actions, advantages = np.array(params.actions), np.array(params.advantages, dtype=float)
    if len(actions) != len(advantages):
        raise ValueError("one advantage per stored action")
    log_pi_old = np.log(pi_old)
    n = len(actions)
    one_hot = np.eye(len(pi_old))[actions]
    # One state's logits, stepped for several epochs on a batch drawn from π_old; the advantages are given numbers.
    reach_bandit(len(pi_old), data="old", advantages="estimated")

    def derivative(objective: str, ratio: np.ndarray) -> np.ndarray:
        if objective == "clipped":
            return np.asarray(ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon), dtype=float)
        return np.asarray(ctx.impl.surrogate_objective_grad(ratio, advantages), dtype=float)

    kl: dict[str, list[float]] = {"clipped": [], "plain": []}
    first_steps = {}
    for objective in kl:
        logits = log_pi_old.copy()
        for epoch in range(1, max(params.epochs) + 1):
            log_pi = log_softmax(logits)
            ratio = np.exp(log_pi[actions] - log_pi_old[actions])
            scores = one_hot - np.exp(log_pi)
            step = params.learning_rate * (derivative(objective, ratio)[:, None] * scores).sum(axis=0) / n
            if epoch == 1:
                first_steps[objective] = step
            logits = logits + step
            if epoch in params.epochs:
                kl[objective].append(float(pi_old @ (log_pi_old - log_softmax(logits))))
    bound = rounding_bound(8 * n, params.learning_rate * float(np.abs(advantages).max()))
    return {"kl_clipped": kl["clipped"], "kl_plain": kl["plain"],
            "first_epoch_steps_agree": bool(np.abs(first_steps["clipped"] - first_steps["plain"]).max() <= bound),
            "clipped_moves_less_at_every_reported_epoch": all(c < p for c, p in zip(kl["clipped"], kl["plain"],
                                                                                     strict=True)),
            "clipped_kl_grows": all(b > a for a, b in zip(kl["clipped"][:-1], kl["clipped"][1:], strict=True))}
