"""The critic and the on-policy actor-critic loop (module steps 4.3.1, 4.3.2, 4.3.4, 4.3.5).

Step 4.3.1: the critic's loss, what a critic fitted to wrong targets learns, explained variance (its
endpoints, and the share of the targets' variance a critic accounts for), a critic that raises the variance
of the actor's update, and the gradient routes of a shared trunk. Step 4.3.2: the TD error's mean with the
exact critic, and the bias of the TD error and of n-step estimates with an approximate critic and their
variance, by exact enumeration on a chain and on random MDPs, discounted (γ < 1) or episodic (γ = 1 as well).
Step 4.3.4: the state at a time-limit truncation has a continuation value of its own. Step 4.3.5: the loop,
and what using each batch once buys: the step is the collecting policy's gradient in expectation, and a
reused batch no longer gives the changed policy's.

The loop runs on a small corridor: states 0..n-1 and a terminal goal n, start in state 0;
"left" and "right" move one step, slipping the other way with a small probability; every step
costs ``step_reward`` and reaching the goal pays ``goal_reward`` and ends the episode. A time
limit truncates long episodes, so one rollout holds terminations, truncations, the buffer's
edge and ordinary steps. The objective J(θ) = Σ_s ρ_0(s) V^{π_θ}(s) of the untruncated
discounted task is computed here by a linear solve, independently of impl.
"""

from __future__ import annotations

import functools
import math
from collections import namedtuple
from fractions import Fraction

import numpy as np
from pydantic import Field

from claims_harness import Context, NoParams, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, exact_policy_values, over, probability_rows, softmax_scores
from verifiers._numeric import as_written, assert_close, log_softmax, rounding_bound, smallest
from verifiers._reach import reach_mdp, transitions_of


def _mean_and_variance(probability: np.ndarray, x: np.ndarray) -> tuple[Fraction, Fraction]:
    """E[x] and Var[x] = E[(x - E x)^2] of a finite distribution, exactly; for x of shape [M, ...], E|x - E x|^2."""
    weights = probability.reshape(probability.shape + (1,) * (x.ndim - 1))
    mean = (weights * x).sum(axis=0)
    deviation = x - mean
    return mean, (weights * deviation * deviation).sum()


# Central differences of a quadratic are exact in exact arithmetic for any step h.
_exact_batches = st.integers(min_value=1, max_value=8).flatmap(
    lambda n: st.tuples(st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                        st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                        st.integers(1, 16)))


@verifier(kind="property", uses=("squared_error_value_loss", "squared_error_value_loss_grad"))
@given(_exact_batches)
def value_loss_gradient_property(ctx: Context, batch: tuple) -> None:
    """On random batches of exact predictions and targets, impl's gradient of the critic loss
    equals central finite differences of impl's loss, (L(V + h e_i) - L(V - h e_i)) / 2h, which
    are exact for a quadratic loss at any h; and it is (V - V̂)/N, as the formula says.

    The contract does not require the loss or its gradient to be exact for fractions: a loss
    computed in floats (``0.5 * ((v - target) ** 2).mean()``, as CleanRL writes it) rounds by at
    most rounding_bound(4N, |L|), which the difference quotient divides by 2h, and a float gradient
    (V - V̂)/N by rounding_bound(2, |V - V̂|). Exact results are held to the same bounds, far below
    the factor N the check is there to catch."""
    predictions, targets, sixteenths = batch
    v, target = over(predictions, 8), over(targets, 8)
    step = Fraction(sixteenths, 16)
    gradient = ctx.impl.squared_error_value_loss_grad(v, target)
    for i in range(len(v)):
        up, down = v.copy(), v.copy()
        up[i] += step
        down[i] -= step
        loss_up, loss_down = (ctx.impl.squared_error_value_loss(x, target) for x in (up, down))
        difference = (loss_up - loss_down) / (2 * step)
        gradient_rounding = rounding_bound(2, float(abs(v[i] - target[i])))
        rounding = (2 * rounding_bound(4 * len(v), float(max(abs(loss_up), abs(loss_down)))) / float(2 * step)
                    + gradient_rounding)
        assert_close(gradient[i], difference, rounding, f"entry {i} of the gradient against the difference quotient")
        assert_close(gradient[i], (v[i] - target[i]) / len(v), gradient_rounding, f"entry {i} of the gradient")


_targets = st.integers(min_value=2, max_value=40).flatmap(
    lambda n: st.tuples(st.arrays(np.float64, n, elements=st.floats(-100, 100, allow_nan=False)),
                        st.floats(-100, 100, allow_nan=False)))


@verifier(kind="property", uses=("explained_variance",))
@given(_targets)
def explained_variance_property(ctx: Context, batch: tuple) -> None:
    """On random targets that vary, impl's explained variance is exactly 1 for predictions equal to
    the targets and 0 up to rounding for any constant prediction.

    Shifting the targets by a constant c changes each deviation from the mean by a few roundings
    of numbers bounded by M = max|V̂| + |c|; squared in the variance, that is an error of order
    eps M std(V̂) against Var(V̂) = std(V̂)^2 (plus eps M^2 from the squares themselves), so
    Var(V̂ - c) / Var(V̂) - 1 stays within the rounding bound of 4N operations on (M / std(V̂))^2.
    """
    targets, constant = batch
    spread = float(np.std(targets))
    if spread == 0:
        return
    assert ctx.impl.explained_variance(targets.copy(), targets) == 1, "a perfect critic"
    constant_critic = ctx.impl.explained_variance(np.full_like(targets, constant), targets)
    bound = rounding_bound(4 * len(targets), ((float(np.abs(targets).max()) + abs(constant)) / spread) ** 2)
    assert_close(constant_critic, 0.0, bound, "explained variance of a constant critic")


_fits = st.tuples(st.integers(1, 4), st.integers(1, 12)).flatmap(
    lambda size: st.tuples(st.lists(st.integers(0, size[0] - 1), min_size=size[1], max_size=size[1]),
                           st.lists(st.integers(-80, 80), min_size=size[1], max_size=size[1]),
                           st.lists(st.integers(-40, 40), min_size=size[1], max_size=size[1]),
                           st.integers(1, 16)))


@verifier(kind="property", uses=("squared_error_value_loss", "squared_error_value_loss_grad"))
@given(_fits)
def critic_fits_target_errors_property(ctx: Context, batch: tuple) -> None:
    """On random exact batches of visited states, targets V̂_t and target errors ε_t, a tabular
    critic V_φ(s) = φ[s] trained on impl's loss ends where the loss is least: in each state, at the
    mean of that state's targets. So the critic fitted to the corrupted targets V̂ + ε is the one
    fitted to V̂ plus the per-state mean of ε: it inherits the errors' bias one for one.

    Checked through impl: the gradient in φ (impl's per-prediction gradient summed over the steps
    in each state, the chain rule written here) is exactly zero at the per-state means, impl's loss
    is larger when any visited state's value moves off its mean, and where the errors do not
    average to zero in a state the fit to the clean targets is not a stationary point of the
    corrupted loss.
    """
    states, targets, errors, sixteenths = batch
    reach(states=max(states) + 1)  # the tabular critic's table, one entry per state up to the last visited
    s = np.array(states)
    clean = over(targets, 8)
    corrupted = clean + over(errors, 8)
    visited = sorted(set(states))

    def fit(target: np.ndarray) -> np.ndarray:
        phi = np.array([Fraction(0)] * (max(states) + 1), dtype=object)
        for state in visited:
            phi[state] = sum(target[s == state]) / int((s == state).sum())
        return phi

    def gradient(phi: np.ndarray, target: np.ndarray) -> np.ndarray:
        per_step = ctx.impl.squared_error_value_loss_grad(phi[s], target)
        return np.array([sum(per_step[s == state]) for state in range(len(phi))], dtype=object)

    step = Fraction(sixteenths, 16)
    for target in (clean, corrupted):
        phi = fit(target)
        assert all(g == 0 for g in gradient(phi, target)), ("not stationary at the means", gradient(phi, target))
        least = ctx.impl.squared_error_value_loss(phi[s], target)
        for state in visited:
            for moved in (phi[state] + step, phi[state] - step):
                other = phi.copy()
                other[state] = moved
                assert ctx.impl.squared_error_value_loss(other[s], target) > least, ("not least", state)
    inherited = fit(corrupted) - fit(clean)
    for state in visited:
        error_mean = sum((corrupted - clean)[s == state]) / int((s == state).sum())
        assert inherited[state] == error_mean, (state, inherited[state], error_mean)
        assert (gradient(fit(clean), corrupted)[state] == 0) == (error_mean == 0), ("clean fit", state)


class OneStepCritics(NoParams):
    """One-step episodes from equally likely start states, the uniform policy, and a critic's values."""

    rewards: list[list[float]] = Field(min_length=1, description="R[s][a]: the reward of action a in start state s")
    bad_critic: list[float] = Field(min_length=1, description="V̂(s) of the bad critic, one per start state")


@verifier(kind="exact", uses=("gae_advantages", "score_function_gradient", "softmax_score"), params=OneStepCritics)
def bad_critic_variance_exact(ctx: Context) -> dict[str, object]:
    """The exact variance of the actor's one-sample update Â ∇_θ log π_θ(a|s), with Â from impl's
    GAE (one step to a true terminal: Â = r - V̂(s)) and impl's score-function estimate, for three
    critics: none (V̂ = 0), the exact one (V̂ = V^π), and the bad one of the claim.

    The policy is the uniform tabular softmax; its score e_a - π is exact here and impl's softmax
    score must agree with it. Every (s, a) is enumerated with probability 1/(S A). The variance is
    E|g - E g|^2 over the S x A entries of the update g. The expected update is the same for every
    critic (a state baseline adds nothing to it, step 4.2.1); only the variance moves.
    """
    rewards = as_fractions(ctx.params.rewards)
    n_states, n_actions = rewards.shape
    if len(ctx.params.bad_critic) != n_states:
        raise ValueError(f"bad_critic needs one value per start state ({n_states}), got {len(ctx.params.bad_critic)}")
    pi = np.full(n_actions, Fraction(1, n_actions), dtype=object)
    scores = softmax_scores(pi)
    impl_scores = ctx.impl.softmax_score(np.zeros((n_actions, n_actions)), np.arange(n_actions))
    score_agrees = bool(np.all(np.abs(impl_scores - scores.astype(float)) <= rounding_bound(4 * n_actions, 1.0)))
    s, a = (index.reshape(-1) for index in np.indices((n_states, n_actions)))
    samples = len(s)
    # The score of the tabular policy: row s holds e_a - π, every other row zero.
    table_scores = np.zeros((samples, 1, n_states, n_actions), dtype=object)
    for i in range(samples):
        table_scores[i, 0, s[i]] = scores[a[i]]
    values = {"none": np.zeros(n_states, dtype=object) + Fraction(0),
              "exact": rewards.sum(axis=1) * pi[0],
              "bad": as_fractions(ctx.params.bad_critic)}
    probability = np.full(samples, Fraction(1, samples), dtype=object)
    one = np.ones((1, samples), dtype=int)
    gamma = Fraction(1)
    means, variances = {}, {}
    for name, critic in values.items():
        # Rewards are deterministic, so r - V^π(s) is A^π(s, a) exactly; the other critics' advantages are estimates.
        # The update is averaged under the uniform policy it differentiates: the data are the current policy's.
        reach(states=n_states, actions=n_actions, horizon=1, discount=gamma, data="current",
              advantages="exact" if name == "exact" else "estimated")
        advantages = ctx.impl.gae_advantages(rewards[s, a][None, :], critic[s][None, :],
                                             np.zeros((1, samples), dtype=object) + Fraction(0), one, one,
                                             gamma, Fraction(1))
        updates = ctx.impl.score_function_gradient(advantages.reshape(samples, 1), table_scores)
        means[name], variances[name] = _mean_and_variance(probability, updates)
    return {
        "softmax_score_agrees": score_agrees,
        "mean_update_unchanged": bool(np.array_equal(means["none"], means["bad"])
                                      and np.array_equal(means["none"], means["exact"])),
        "variance_without_critic": variances["none"],
        "variance_exact_critic": variances["exact"],
        "variance_bad_critic": variances["bad"],
        "variance_change_exact_critic": variances["exact"] - variances["none"],
        "variance_change_bad_critic": variances["bad"] - variances["none"],
    }


class SharedTrunk(NoParams):
    """The size of the actor-critic network and of its batch."""

    batch_size: int = Field(ge=1, le=256, description="observations in the batch")
    obs_size: int = Field(ge=1, le=16, description="entries of an observation")
    n_actions: int = Field(ge=2, le=8, description="actions of the policy head")
    hidden: int = Field(ge=1, le=64, description="width of the one hidden layer, the shared trunk")


def _shared_layer_gradient(grads: dict[str, np.ndarray]) -> np.ndarray:
    """The gradient of the tied first layer: the sum over its two uses, in the policy head and in the value head."""
    return np.concatenate([(grads["policy.w0"] + grads["value.w0"]).ravel(),
                           (grads["policy.b0"] + grads["value.b0"]).ravel()])


@verifier(kind="property",
          uses=("actor_critic_init", "actor_critic_forward", "actor_critic_backward"), params=SharedTrunk)
def shared_trunk_routes_property(ctx: Context) -> dict[str, object]:
    """impl's actor-critic network with the first layers of its two heads tied into one shared
    trunk h = tanh(x W + b): the gradient routes of L = L_actor + L_V with the advantages held fixed.

    L_actor = -(1/B) Σ_i Â_i log π(a_i|x_i) with Â_i = V̂_i - V(x_i) as fixed numbers, and
    L_V = (1/2B) Σ_i (V(x_i) - V̂_i)^2. The verifier runs its own forward pass and backpropagates
    by hand to the trunk: the actor's route is (∂L/∂logits) W_π^T, the critic's (∂L/∂V) w_V^T,
    both through tanh' = 1 - h^2. impl's backward, given the two upstream gradients together or one
    at a time, must match each: the trunk's gradient is the sum of the actor's and the critic's
    branches, and the critic's branch is not zero (stopping the advantage's gradient does not
    stop the critic's route into the trunk). The actor's branch alone must leave the value head's
    own parameters exactly untouched; without the stop-gradient, ∂L_actor/∂V_i = log π(a_i|x_i)/B
    would reach them, and impl's backward of that upstream gradient must show it does.

    Parameters are impl's initialisation plus noise of scale 0.3, so the policy's logits (whose
    initial gain is 0.01) carry a gradient of their own; observations are standard normal.
    """
    p = ctx.params

    def routes(seed: int) -> None:
        rng = np.random.default_rng(seed)
        network = ctx.impl.actor_critic_init(rng, p.obs_size, p.n_actions, (p.hidden,))
        network = {key: value + rng.normal(scale=0.3, size=np.shape(value)) for key, value in network.items()}
        network["value.w0"], network["value.b0"] = network["policy.w0"].copy(), network["policy.b0"].copy()
        x = rng.normal(size=(p.batch_size, p.obs_size))
        actions = rng.integers(p.n_actions, size=p.batch_size)
        targets = rng.normal(size=p.batch_size)
        reach(actions=p.n_actions, advantages="estimated")  # Â = V̂ - V from drawn targets: estimates

        trunk = np.tanh(x @ network["policy.w0"] + network["policy.b0"])
        logits = trunk @ network["policy.w1"] + network["policy.b1"]
        values = (trunk @ network["value.w1"] + network["value.b1"])[:, 0]
        output = ctx.impl.actor_critic_forward(network, x)
        argument = float((np.abs(x) @ np.abs(network["policy.w0"]) + np.abs(network["policy.b0"])).max())
        forward_bound = rounding_bound(4 * (p.obs_size + p.hidden), float(
            (np.abs(trunk) @ np.abs(np.hstack([network["policy.w1"], network["value.w1"]]))).max()) * (1 + argument))
        assert_close(output.logits, logits, forward_bound, "impl's logits against the tied network's")
        assert_close(output.values, values, forward_bound, "impl's values against the tied network's")

        log_pi = logits - logits.max(axis=1, keepdims=True)
        log_pi = log_pi - np.log(np.exp(log_pi).sum(axis=1, keepdims=True))
        advantages = targets - values
        d_logits = -(advantages / p.batch_size)[:, None] * (np.eye(p.n_actions)[actions] - np.exp(log_pi))
        d_values = (values - targets) / p.batch_size
        undetached_d_values = log_pi[np.arange(p.batch_size), actions] / p.batch_size

        def by_hand(d_logit: np.ndarray, d_value: np.ndarray) -> np.ndarray:
            d_pre = (d_logit @ network["policy.w1"].T + d_value[:, None] @ network["value.w1"].T) * (1 - trunk**2)
            return np.concatenate([(x.T @ d_pre).ravel(), d_pre.sum(axis=0)])

        magnitude = p.batch_size * float(np.abs(x).max() + 1) * float(
            np.abs(d_logits).max() * np.abs(network["policy.w1"]).sum(axis=1).max()
            + np.abs(d_values).max() * np.abs(network["value.w1"]).max()) * (1 + argument)
        bound = rounding_bound(4 * (p.batch_size + p.n_actions + p.obs_size + 4), magnitude)
        no_logits, no_values = np.zeros_like(d_logits), np.zeros_like(d_values)
        total = ctx.impl.actor_critic_backward(network, output, d_logits, d_values)
        actor = ctx.impl.actor_critic_backward(network, output, d_logits, no_values)
        critic = ctx.impl.actor_critic_backward(network, output, no_logits, d_values)
        critic_branch = by_hand(no_logits, d_values)
        assert_close(_shared_layer_gradient(total), by_hand(d_logits, d_values), bound, "the trunk's total gradient")
        assert_close(_shared_layer_gradient(actor), by_hand(d_logits, no_values), bound, "the trunk's actor branch")
        assert_close(_shared_layer_gradient(critic), critic_branch, bound, "the trunk's critic branch")
        assert np.abs(critic_branch).max() > bound, "the critic's branch does not reach the trunk"
        assert not any(np.any(actor[key]) for key in ("value.w1", "value.b1")), "the actor's loss in the value head"
        leaked = ctx.impl.actor_critic_backward(network, output, d_logits, undetached_d_values)
        expected_leak = trunk.T @ undetached_d_values
        leak_bound = rounding_bound(4 * p.batch_size, float(np.abs(undetached_d_values).sum()))
        assert_close(leaked["value.w1"][:, 0], expected_leak, leak_bound, "the undetached route to value.w1")
        assert np.abs(expected_leak).max() > leak_bound, "without the stop-gradient nothing would reach the value head"

    return check_property(ctx, routes, st.integers(0, 2**32 - 1))


class Corridor(NoParams):
    """The corridor and the settings of one actor-critic iteration."""

    states: int = Field(ge=1, le=10, description="non-terminal states before the goal")
    slip: float = Field(ge=0, lt=0.5, description="probability of moving the other way")
    step_reward: float = Field(description="reward of every step")
    goal_reward: float = Field(description="extra reward for reaching the goal")
    time_limit: int = Field(ge=1, description="steps after which an episode is truncated")
    gamma: float = Field(gt=0, le=1, description="the discount γ (below 1 where J or V^π of the untruncated task "
                                                  "is solved)")
    gae_lambda: float = Field(ge=0, le=1, description="the GAE parameter λ")
    n_steps: int = Field(ge=2, description="transitions per environment in one rollout")
    n_envs: int = Field(ge=1, description="environments run in lockstep")
    actor_lr: float = Field(gt=0, description="the actor's step size")
    critic_lr: float = Field(gt=0, description="the critic's step size")
    runs: dict[str, int] = Field(default={"smoke": 16, "full": 64},
                                 description="independent iterations per profile, for the experiment")


def corridor(params: Corridor) -> dict[str, np.ndarray]:
    """P[s, a, s2], R[s, a] (expected rewards), the terminal mask and ρ_0 of the corridor."""
    goal = params.states
    n_states = goal + 1
    P = np.zeros((n_states, 2, n_states))
    for s in range(goal):
        left, right = max(s - 1, 0), s + 1
        P[s, 0, left] += 1 - params.slip
        P[s, 0, right] += params.slip
        P[s, 1, right] += 1 - params.slip
        P[s, 1, left] += params.slip
    P[goal, :, goal] = 1
    R = params.step_reward + params.goal_reward * P[:, :, goal]
    R[goal] = 0
    terminal = np.arange(n_states) == goal
    return {"P": P, "R": R, "terminal": terminal, "rho_0": (np.arange(n_states) == 0).astype(float)}


def objective(theta: np.ndarray, mdp: dict[str, np.ndarray], gamma: float) -> float:
    """J(θ) = ρ_0 · V^{π_θ}, with V^{π_θ} from (I - γ P_π) V = R_π (the goal absorbs with reward 0)."""
    if gamma >= 1:
        raise ValueError(f"J of the untruncated corridor is solved here for γ < 1 only (the goal absorbs), got {gamma}")
    pi = np.exp(log_softmax(theta))
    transition = np.einsum("sa,sat->st", pi, mdp["P"])
    values = np.linalg.solve(np.eye(len(pi)) - gamma * transition, (pi * mdp["R"]).sum(axis=1))
    return float(mdp["rho_0"] @ values)


def reach_corridor(params: Corridor, mdp: dict[str, np.ndarray], **more: object) -> None:
    """What a corridor witness reached: its states (the goal included), actions and transitions, the time
    limit as the most decisions of an episode, and any other dimension (the discount, where the check
    computes with it; the policy its data come from)."""
    P = mdp["P"]
    reach(states=P.shape[0], actions=P.shape[1], transitions=transitions_of(P), horizon=params.time_limit, **more)


def _collect(ctx: Context, theta: np.ndarray, phi: np.ndarray, mdp: dict[str, np.ndarray], rng: np.random.Generator
             ) -> object:
    params = ctx.params
    return ctx.impl.collect_rollout(theta, phi, mdp["P"], mdp["R"], mdp["terminal"], mdp["rho_0"],
                                    params.time_limit, params.n_steps, params.n_envs, rng)


def _start(mdp: dict[str, np.ndarray], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random actor and critic, so that no property holds by symmetry of a zero start."""
    n_states = len(mdp["rho_0"])
    return rng.normal(scale=0.5, size=(n_states, 2)), rng.normal(size=n_states)


def _rollout_findings(ctx: Context, params: Corridor, mdp: dict[str, np.ndarray], theta: np.ndarray,
                      phi: np.ndarray, rollout: object) -> dict[str, object]:
    """What impl's rollout stores, against the policy, the critic and the environment; see :func:`rollout_contents`."""
    shape = (params.n_steps, params.n_envs)
    names = ("a_t", "log_pi_old_t", "r_t", "v_t", "v_tp1", "terminated_t", "trace_cut_t", "s_t", "s_tp1")
    stored = {name: np.shape(getattr(rollout, name, None)) == shape for name in names}
    if not all(stored.values()):
        return {f"stores_{name}": kept for name, kept in stored.items()}
    s, s_next, a = rollout.s_t, rollout.s_tp1, rollout.a_t
    log_pi = log_softmax(theta)[s, a]
    terminated = mdp["terminal"][s_next]
    resets = np.zeros(shape, dtype=bool)
    elapsed = np.zeros(shape[1], dtype=int)
    for t in range(shape[0]):
        elapsed += 1
        resets[t] = terminated[t] | (elapsed >= params.time_limit)
        elapsed[resets[t]] = 0
    expected_cut = resets.copy()
    expected_cut[-1] = True
    continued = np.array_equal(s[1:][~resets[:-1]], s_next[:-1][~resets[:-1]])
    restarted = bool(np.all(mdp["rho_0"][s[1:][resets[:-1]]] > 0))
    return {
        "stores_actions": stored["a_t"],
        "stores_old_log_probabilities": stored["log_pi_old_t"],
        "stores_rewards": stored["r_t"],
        "stores_values": stored["v_t"] and stored["v_tp1"],
        "stores_terminated_mask": stored["terminated_t"],
        "stores_trace_cut_mask": stored["trace_cut_t"],
        "old_log_probabilities_are_the_policy": bool(
            np.all(np.abs(rollout.log_pi_old_t - log_pi) <= rounding_bound(8, float(np.abs(theta).max())))),
        "values_are_the_critic": bool(np.array_equal(rollout.v_t, phi[s]) and np.array_equal(rollout.v_tp1,
                                                                                                  phi[s_next])),
        "rewards_are_the_environment": bool(np.array_equal(rollout.r_t, mdp["R"][s, a])),
        "terminated_marks_the_goal": bool(np.array_equal(rollout.terminated_t == 1, terminated)),
        "trace_cut_marks_resets_and_the_edge": bool(np.array_equal(rollout.trace_cut_t == 1, expected_cut)),
        "episodes_continue_or_restart": bool(continued and restarted),
        "terminations": int(terminated.sum()),
        "truncations": int((resets & ~terminated).sum()),
        "buffer_edges_without_reset": int((~resets[-1]).sum()),
        "ordinary_steps": int((~expected_cut).sum()),
    }


@verifier(kind="exact", uses=("collect_rollout",), params=Corridor)
def rollout_contents(ctx: Context) -> dict[str, object]:
    """What impl's rollout stores, checked against the policy, the critic and the environment.

    The old log-probabilities must be log π_θ(a_t|s_t) of the collecting policy, the values
    V_φ(s_t) and V_φ(s_{t+1}) of the collecting critic, ``terminated_t`` must flag exactly the
    steps into the goal, and ``trace_cut_t`` exactly the steps after which the environment resets
    (a termination, or the time limit counted here from each reset) and the buffer's last step.
    After a reset the next state must be a start state, otherwise it must be s_{t+1}. The counts
    show that the rollout holds every event of step 4.3.4's table.
    """
    mdp = corridor(ctx.params)
    theta, phi = _start(mdp, ctx.rng)
    reach_corridor(ctx.params, mdp, data="current")  # the rollout is read against the policy that collected it
    return _rollout_findings(ctx, ctx.params, mdp, theta, phi, _collect(ctx, theta, phi, mdp, ctx.rng))


def _sixteenths(low: int, high: int) -> st.SearchStrategy[float]:
    return st.integers(low, high).map(lambda k: k / 16)


# Corridors and loop settings in the contract's domain: any size, slip, rewards, time limit and buffer.
_corridors = st.builds(Corridor, states=st.integers(1, 4), slip=st.sampled_from([0.0, 0.1, 0.3]),
                       step_reward=_sixteenths(-16, 16), goal_reward=_sixteenths(0, 32), time_limit=st.integers(1, 6),
                       gamma=_sixteenths(1, 16), gae_lambda=_sixteenths(0, 16), n_steps=st.integers(2, 12),
                       n_envs=st.integers(1, 4), actor_lr=_sixteenths(1, 16), critic_lr=_sixteenths(1, 16))
_seeds = st.integers(0, 2**32 - 1)


@verifier(kind="property", uses=("collect_rollout",))
@given(_corridors, _seeds)
def rollout_contents_property(ctx: Context, params: Corridor, seed: int) -> None:
    """:func:`rollout_contents`'s findings on random corridors, time limits, buffer sizes, actors and
    critics: every stored array must be what the policy, the critic and the environment produced,
    and both masks must flag exactly their events."""
    rng = np.random.default_rng(seed)
    mdp = corridor(params)
    theta, phi = _start(mdp, rng)
    reach_corridor(params, mdp, data="current")  # the rollout is read against the policy that collected it
    rollout = ctx.impl.collect_rollout(theta, phi, mdp["P"], mdp["R"], mdp["terminal"], mdp["rho_0"],
                                       params.time_limit, params.n_steps, params.n_envs, rng)
    findings = _rollout_findings(ctx, params, mdp, theta, phi, rollout)
    wrong = [name for name, holds in findings.items() if holds is False]
    assert not wrong, wrong


def reference_gae(rollout: object, gamma: float, lambda_: float) -> np.ndarray:
    """Â_t = δ_t + γλ(1 - trace_cut_t) Â_{t+1} with δ_t = r_t + γ(1 - terminated_t) V(s_{t+1}) - V(s_t),
    from the rollout's stored values, one step at a time, written out here."""
    advantages = np.zeros(np.shape(rollout.r_t))
    following = np.zeros(advantages.shape[1:])
    for t in range(len(advantages) - 1, -1, -1):
        delta = rollout.r_t[t] + gamma * (1 - rollout.terminated_t[t]) * rollout.v_tp1[t] - rollout.v_t[t]
        following = delta + gamma * lambda_ * (rollout.trace_cut_t[t] == 0) * following
        advantages[t] = following
    return advantages


def _policy_gradient(theta: np.ndarray, s: np.ndarray, a: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """(1/N) Σ_t Â_t (e_{a_t} - π_θ(·|s_t)) added into row s_t, written out here."""
    pi = np.exp(log_softmax(theta))
    gradient = np.zeros_like(theta)
    for state, action, advantage in zip(s, a, advantages, strict=True):
        gradient[state] -= advantage * pi[state]
        gradient[state, action] += advantage
    return gradient / len(s)


def _critic_step(phi: np.ndarray, s: np.ndarray, targets: np.ndarray, critic_lr: float) -> np.ndarray:
    """φ - lr ∂L_V/∂φ for L_V = (1/2N) Σ_t (φ[s_t] - V̂_t)^2, written out here."""
    gradient = np.zeros_like(phi)
    np.add.at(gradient, s, (phi[s] - targets) / len(s))
    return phi - critic_lr * gradient


def _one_loop(ctx: Context, params: Corridor, seed: int) -> tuple[np.ndarray, np.ndarray, object, np.ndarray, float]:
    """A random actor and critic, impl's rollout of them, the advantages of its stored values, a rounding scale."""
    rng = np.random.default_rng(seed)
    mdp = corridor(params)
    theta, phi = _start(mdp, rng)
    # The iteration updates the policy that collected the rollout; its advantages come from a random critic φ.
    reach_corridor(params, mdp, discount=params.gamma, data="current", advantages="estimated")
    rollout = ctx.impl.collect_rollout(theta, phi, mdp["P"], mdp["R"], mdp["terminal"], mdp["rho_0"],
                                       params.time_limit, params.n_steps, params.n_envs, rng)
    advantages = reference_gae(rollout, params.gamma, params.gae_lambda)
    # Each advantage sums at most T discounted terms, each bounded by |r| + |V(s_t)| + |V(s_{t+1})|.
    scale = params.n_steps * float(np.abs(rollout.r_t).max() + np.abs(rollout.v_t).max()
                                   + np.abs(rollout.v_tp1).max())
    return theta, phi, rollout, advantages, scale


@verifier(kind="property", uses=("collect_rollout", "actor_critic_iteration"))
@given(_corridors, _seeds)
def actor_step_property(ctx: Context, params: Corridor, seed: int) -> None:
    """On random corridors, actors, critics and rollouts, impl's actor step treats the advantages
    as numbers fixed when the data was collected.

    Unnormalised, the new θ must be θ + lr (1/N) Σ_t Â_t (e_{a_t} - π_θ(·|s_t)) with Â computed here
    from the rollout's stored rewards, values and masks, up to rounding. With or without
    normalisation, it must not change when the critic's step changes (three times the critic's
    step size): an actor whose advantages moved with the critic's parameters would.
    """
    theta, phi, rollout, advantages, scale = _one_loop(ctx, params, seed)
    s, a = rollout.s_t.reshape(-1), rollout.a_t.reshape(-1)

    def actor_after(normalize: bool, critic_lr: float) -> np.ndarray:
        return ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                               params.actor_lr, critic_lr, normalize=normalize)[0]

    expected = theta + params.actor_lr * _policy_gradient(theta, s, a, advantages.reshape(-1))
    bound = rounding_bound(4 * (len(s) + params.n_steps) + 16,
                           float(np.abs(theta).max()) + params.actor_lr * (scale + float(np.abs(advantages).max())))
    unnormalised = actor_after(False, params.critic_lr)
    assert_close(unnormalised, expected, bound, "the actor's step against that of the stored advantages")
    for normalize in (False, True):
        moved = actor_after(normalize, 3 * params.critic_lr)
        assert np.array_equal(actor_after(normalize, params.critic_lr), moved), \
            ("the actor's step moves with the critic's", normalize)


@verifier(kind="property", uses=("collect_rollout", "actor_critic_iteration"))
@given(_corridors, _seeds)
def critic_step_property(ctx: Context, params: Corridor, seed: int) -> None:
    """On random corridors, actors, critics and rollouts, impl's critic step is the gradient step of
    L_V = (1/2N) Σ_t (φ[s_t] - V̂_t)^2 alone, with the targets V̂_t = V_old(s_t) + Â_t built here from
    the rollout's stored values and the unnormalised advantages, whether or not the actor's
    advantages are normalised, and whatever the actor's step size (twice the drawn one as well)."""
    theta, phi, rollout, advantages, scale = _one_loop(ctx, params, seed)
    s = rollout.s_t.reshape(-1)
    targets = (rollout.v_t + advantages).reshape(-1)
    expected = _critic_step(phi, s, targets, params.critic_lr)
    bound = rounding_bound(4 * (len(s) + params.n_steps) + 16,
                           float(np.abs(phi).max()) + params.critic_lr * (scale + float(np.abs(targets).max())))
    for normalize in (False, True):
        for actor_lr in (params.actor_lr, 2 * params.actor_lr):
            _, phi_next = ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                          actor_lr, params.critic_lr, normalize=normalize)
            assert_close(phi_next, expected, bound, f"the critic's step (normalize={normalize}, actor_lr={actor_lr}) "
                         "against that of L_V with the unnormalised targets")


@verifier(kind="exact", uses=("collect_rollout", "gae_advantages"), params=Corridor)
def actor_loss_depends_on_critic(ctx: Context) -> dict[str, object]:
    """The actor's loss -(1/N) Σ_t Â_t(φ) log π_θ(a_t|s_t), with impl's GAE recomputed from the
    critic's values φ[s_t], φ[s_{t+1}] on impl's rollout, does depend on φ: without the stop-gradient
    its gradient would reach the critic. The loss is linear in φ (GAE is linear in the values),
    so L(φ + e_s) - L(φ) is its derivative along state s, exactly up to rounding."""
    params = ctx.params
    mdp = corridor(params)
    theta, phi = _start(mdp, ctx.rng)
    reach_corridor(params, mdp, discount=params.gamma, data="current", advantages="estimated")
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    log_pi = log_softmax(theta)[rollout.s_t, rollout.a_t]

    def actor_loss(critic: np.ndarray) -> float:
        advantages = ctx.impl.gae_advantages(rollout.r_t, critic[rollout.s_t], critic[rollout.s_tp1],
                                             rollout.terminated_t, rollout.trace_cut_t, params.gamma, params.gae_lambda)
        return float(-(advantages * log_pi).mean())

    base = actor_loss(phi)
    sensitivity = max(abs(actor_loss(phi + unit) - base) for unit in np.eye(len(phi)))
    # Each advantage sums at most T terms bounded by |r| + 2 (|φ| + 1); the loss weighs them by |log π|.
    scale = (params.n_steps * float(np.abs(rollout.r_t).max() + 2 * (np.abs(phi).max() + 1))
             * float(np.abs(log_pi).max()))
    noise = 2 * rounding_bound(4 * (rollout.r_t.size + params.n_steps), scale)
    return {"actor_loss_depends_on_critic": bool(sensitivity > noise), "actor_loss_sensitivity_to_critic": sensitivity,
            "rounding_bound": noise}


@verifier(kind="exact", uses=("collect_rollout", "actor_critic_iteration"), params=Corridor)
def normalisation_leaves_critic_step(ctx: Context) -> dict[str, object]:
    """impl's iteration with and without advantage normalisation: the critic's step (which follows
    the value targets) must be identical, while the actor's step differs."""
    params = ctx.params
    mdp = corridor(params)
    theta, phi = _start(mdp, ctx.rng)
    reach_corridor(params, mdp, discount=params.gamma, data="current", advantages="estimated")
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    updates = {normalize: ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                          params.actor_lr, params.critic_lr, normalize=normalize)
               for normalize in (True, False)}
    return {"critic_step_unchanged": bool(np.array_equal(updates[True][1], updates[False][1])),
            "actor_step_difference": float(np.abs(updates[True][0] - updates[False][0]).max())}


@verifier(kind="experiment", uses=("collect_rollout", "actor_critic_iteration"), params=Corridor)
def iteration_improves_return(ctx: Context) -> dict[str, object]:
    """One iteration of impl's loop from the uniform policy and a zero critic, repeated on
    independent rollouts: the exact J before, and J after each run, by a linear solve here.

    Reports each run's improvement J_after - J_before and :func:`improvement_statistics` of them.
    """
    params = ctx.params
    mdp = corridor(params)
    theta, phi = np.zeros((len(mdp["rho_0"]), 2)), np.zeros(len(mdp["rho_0"]))
    # Every run updates the policy that collected its rollout, with advantages from a zero critic's GAE.
    reach_corridor(params, mdp, discount=params.gamma, data="current", advantages="estimated")
    before = objective(theta, mdp, params.gamma)
    improvements = []
    for _ in range(params.runs[ctx.profile]):
        rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
        theta_next, _ = ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                        params.actor_lr, params.critic_lr)
        improvements.append(float(objective(theta_next, mdp, params.gamma) - before))
    return {"j_before": before, "runs": len(improvements), "improvements": improvements,
            **improvement_statistics(improvements)}


def improvement_statistics(improvements: list[float]) -> dict[str, float]:
    """What the claim states of the runs' improvements of J: their quartiles, smallest, and the share above 0."""
    lower, median, upper = np.percentile(improvements, [25, 50, 75])
    return {"improvement_lower_quartile": float(lower), "improvement_median": float(median),
            "improvement_upper_quartile": float(upper), "improvement_min": float(smallest(improvements)),
            "share_improved": float(np.mean(np.array(improvements) > 0))}


# ------------------------------------------------------------------ 4.3.2: bias and variance of TD and n-step estimates

SAFE, RISKY = 0, 1


class Chain(NoParams):
    """A chain of ``length`` states that every action advances by one; the episode ends after the last.

    In every state the policy takes the risky action with ``risky_probability``; it pays
    ``risky_high`` with probability ``risky_success`` and ``risky_low`` otherwise. The safe action
    pays ``safe_reward``. The critic is V^π plus ``critic_error`` in every state, the terminal end
    included (a critic's output there is as arbitrary as anywhere; no target may bootstrap from it).
    """

    length: int = Field(ge=1, le=6, description="decisions per episode")
    gamma: float = Field(gt=0, le=1, description="the discount γ")
    risky_probability: float = Field(ge=0, le=1, description="π(risky | s) in every state")
    risky_success: float = Field(ge=0, le=1, description="probability that the risky action pays risky_high")
    safe_reward: float
    risky_high: float
    risky_low: float
    critic_error: float = Field(0, description="V̂(s) - V^π(s) in every state of the chain")


def chain_kernel(chain: Chain) -> np.ndarray:
    """P[k, a, k2] of the chain: both actions advance from k to k + 1, and the end (state ``length``) absorbs.

    Its randomness is in the rewards, not in the next state."""
    P = np.zeros((chain.length + 1, len((SAFE, RISKY)), chain.length + 1), dtype=int)
    for k in range(chain.length):
        P[k, :, k + 1] = 1
    P[chain.length, :, chain.length] = 1
    return P


def reach_chain(chain: Chain, **more: object) -> None:
    """What a chain witness reached: its states, actions and transitions, γ and its episodes' length."""
    reach_mdp(chain_kernel(chain), gamma=as_written(chain.gamma), horizon=chain.length, **more)


def _chain_outcomes(chain: Chain) -> dict[int, list[tuple[Fraction, Fraction]]]:
    """action -> [(reward, probability given the action)], without outcomes of probability 0."""
    success = as_written(chain.risky_success)
    risky = [(as_written(chain.risky_high), success), (as_written(chain.risky_low), 1 - success)]
    return {SAFE: [(as_written(chain.safe_reward), Fraction(1))], RISKY: [(r, p) for r, p in risky if p]}


def _chain_policy(chain: Chain) -> dict[int, Fraction]:
    risky = as_written(chain.risky_probability)
    return {SAFE: 1 - risky, RISKY: risky}


def chain_values(chain: Chain) -> list[Fraction]:
    """V^π(k) for k = 0..length (the end has value 0), backwards from the end, written out here."""
    gamma, outcomes, policy = as_written(chain.gamma), _chain_outcomes(chain), _chain_policy(chain)
    mean_reward = sum(policy[a] * sum(r * p for r, p in outcomes[a]) for a in (SAFE, RISKY))
    values = [Fraction(0)] * (chain.length + 1)
    for k in range(chain.length - 1, -1, -1):
        values[k] = mean_reward + gamma * values[k + 1]
    return values


def chain_action_value(chain: Chain, action: int) -> Fraction:
    """Q^π(0, a) = E[r | a] + γ V^π(1)."""
    return sum(r * p for r, p in _chain_outcomes(chain)[action]) + as_written(chain.gamma) * chain_values(chain)[1]


def chain_critic(chain: Chain, values: list[Fraction]) -> list[Fraction]:
    """V̂ = V^π + e in every state, the terminal end included: only the terminated mask keeps it out of a target."""
    return [v + as_written(chain.critic_error) for v in values]


def _chain_paths(chain: Chain, first_action: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Every episode's rewards [length, M] and its probability [M], exactly; the first action fixed if given."""
    outcomes, policy = _chain_outcomes(chain), _chain_policy(chain)
    step = [(r, policy[a] * p) for a in (SAFE, RISKY) for r, p in outcomes[a] if policy[a] * p]
    first = step if first_action is None else outcomes[first_action]
    paths = [((r,), p) for r, p in first]
    for _ in range(chain.length - 1):
        paths = [(rewards + (r,), probability * p) for rewards, probability in paths for r, p in step]
    rewards = np.array([list(rewards) for rewards, _ in paths], dtype=object).T
    return rewards, np.array([probability for _, probability in paths], dtype=object)


def _chain_estimates(ctx: Context, chain: Chain, rewards: np.ndarray, critic: list[Fraction], n: int) -> np.ndarray:
    """impl's n-step estimate at t = 0 of every episode: Σ_{l<n} γ^l r_l + γ^n V̂(s_n) - V̂(s_0), none past the end."""
    length, paths = rewards.shape
    values = np.array([[critic[k]] * paths for k in range(length + 1)], dtype=object)
    last = np.zeros((length, paths), dtype=int)
    last[-1] = 1
    return ctx.impl.n_step_advantages(rewards, values[:-1], values[1:], last, last, as_written(chain.gamma), n)[0]


def _strictly(values: list[Fraction], better: str) -> bool:
    pairs = list(zip(values[:-1], values[1:], strict=True))
    return all(later < earlier for earlier, later in pairs) if better == "decreasing" else \
        all(later > earlier for earlier, later in pairs)


@verifier(kind="exact", uses=("td_errors",), params=Chain)
def td_error_bias_exact(ctx: Context) -> dict[str, object]:
    """E[δ_0 | s_0, a_0] - A^π(s_0, a_0) on the chain, for both actions, with impl's TD error of each
    first step enumerated exactly: zero with the exact critic, and with the claim's critic error e
    the bias γ e(s_1) - e(s_0) (one step ahead the error is γ e, unless the chain ends there)."""
    chain = ctx.params
    gamma, values = as_written(chain.gamma), chain_values(chain)
    ends = int(chain.length == 1)
    error_term = gamma * (1 - ends) * as_written(chain.critic_error) - as_written(chain.critic_error)
    observed: dict[str, object] = {}
    for critic_name, critic in (("exact_critic", values), ("approximate_critic", chain_critic(chain, values))):
        # The TD error is handed V^π itself, or a critic that errs: exact values, or estimates.
        reach_chain(chain, advantages="exact" if critic is values else "estimated")
        for action_name, action in (("safe", SAFE), ("risky", RISKY)):
            outcomes = _chain_outcomes(chain)[action]
            rewards = np.array([r for r, _ in outcomes], dtype=object)
            probability = np.array([p for _, p in outcomes], dtype=object)
            delta = ctx.impl.td_errors(rewards, np.full(len(rewards), critic[0], dtype=object),
                                       np.full(len(rewards), critic[1], dtype=object),
                                       np.full(len(rewards), ends), gamma)
            advantage = chain_action_value(chain, action) - values[0]
            observed[f"td_bias_{action_name}_{critic_name}"] = _mean_and_variance(probability, delta)[0] - advantage
    observed["bias_is_the_critic_error_term"] = all(
        observed[f"td_bias_{name}_approximate_critic"] == error_term for name in ("safe", "risky"))
    return observed


@verifier(kind="exact", uses=("n_step_advantages",), params=Chain)
def n_step_tradeoff_exact(ctx: Context) -> dict[str, object]:
    """For n = 1 .. length on the chain, the bias and the variance of impl's n-step estimate at
    (s_0, risky), over every episode enumerated exactly with the claim's approximate critic.

    The bias is that of the n-step target Σ γ^l r + γ^n V̂(s_n) (the estimate plus V̂(s_0)) as an
    estimate of Q^π(s_0, a_0): the part of the estimate the critic's error reaches through the
    bootstrap, which must be γ^n e(s_n): γ^n times the constant error before the end, 0 at the end.
    """
    chain = ctx.params
    values = chain_values(chain)
    critic = chain_critic(chain, values)
    reach_chain(chain, advantages="exact" if chain.critic_error == 0 else "estimated")
    rewards, probability = _chain_paths(chain, RISKY)
    q_value = chain_action_value(chain, RISKY)
    gamma, error = as_written(chain.gamma), as_written(chain.critic_error)
    biases, variances = [], []
    for n in range(1, chain.length + 1):
        mean, variance = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, n))
        biases.append(mean + critic[0] - q_value)
        variances.append(variance)
    bootstrap_error = [gamma**n * error * (n < chain.length) for n in range(1, chain.length + 1)]
    return {"target_bias_by_n": biases, "variance_by_n": variances,
            "bias_is_the_bootstrapped_critic_error": biases == bootstrap_error,
            "bias_magnitude_decreases_with_n": _strictly([abs(b) for b in biases], "decreasing"),
            "variance_increases_with_n": _strictly(variances, "increasing"),
            "one_step_variance_is_least": variances[0] == smallest(variances)}


def _n_step_paths(P: np.ndarray, pi: np.ndarray, state: int, action: int, horizon: int
                  ) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], np.ndarray]:
    """Every path s_0 = state, a_0 = action, s_1, a_1, ..., s_horizon and its probability, exactly."""
    paths = [((state,), (action,), Fraction(1))]
    for k in range(horizon):
        grown = []
        for states, actions, probability in paths:
            for following in range(P.shape[-1]):
                step = probability * P[states[-1], actions[-1], following]
                if step == 0:
                    continue
                if k == horizon - 1:
                    grown.append((states + (following,), actions, step))
                    continue
                grown += [(states + (following,), actions + (b,), step * pi[following, b])
                          for b in range(pi.shape[1]) if pi[following, b]]
        paths = grown
    return ([states for states, _, _ in paths], [actions for _, actions, _ in paths],
            np.array([probability for _, _, probability in paths], dtype=object))


def _small_mdp(drawn: tuple) -> dict[str, object]:
    """A random exact MDP, discounted (γ < 1, every state live) or episodic (γ <= 1 with a terminal state).

    An episodic MDP's last state is terminal: it absorbs, pays 0 and is worth 0, and every live state and
    action reaches it with probability at least 1/10, so its episodes end with probability 1 and V^π is
    finite at γ = 1 as well. A deterministic MDP sends each (s, a) to the next state of largest weight
    (discounted ones only: a deterministic episodic MDP could cycle among live states forever).
    """
    (n_live, n_actions, episodic, deterministic, weights, terminal_weights, policy, eighths, errors,
     gamma_sixteenths, state, action, horizon) = drawn
    n_states = n_live + episodic
    table = np.array(weights[:n_live * n_actions * n_live], dtype=int).reshape(n_live, n_actions, n_live)
    if deterministic and not episodic:
        table = (np.arange(n_live) == table.argmax(axis=-1)[..., None]).astype(int)
    if episodic:
        # A terminal weight of 1 to 4 against live weights of at most 3 x 3: at least 1/10 of every row.
        reaching_the_end = np.array(terminal_weights[:n_live * n_actions], dtype=int).reshape(n_live, n_actions, 1)
        table = np.concatenate([table, reaching_the_end + 1], axis=-1)
        table = np.concatenate([table, np.zeros((1, n_actions, n_states), dtype=int)])
        table[-1, :, -1] = 1
    policy_table = np.array(policy[:n_states * n_actions], dtype=int).reshape(n_states, n_actions)
    if episodic:
        policy_table[-1] = np.arange(n_actions) == 0  # one action in the terminal state: its paths do not branch
    R = over(eighths[:n_states * n_actions], 8).reshape(n_states, n_actions)
    if episodic:
        R[-1] = Fraction(0)
    return {"P": probability_rows(table), "pi": probability_rows(policy_table), "R": R,
            "error": over(errors[:n_states], 8),
            "gamma": Fraction(gamma_sixteenths if episodic else min(gamma_sixteenths, 15), 16),
            "live": n_live, "terminal": n_live if episodic else None,
            "state": state % n_live, "action": action % n_actions, "horizon": horizon}


# 1 to 3 live states, 2 or 3 actions, discounted or episodic, stochastic or (discounted only) deterministic. The
# paths of an n-step estimate grow as (states x actions)^n, so the largest MDPs take horizons of 2 only.
_small_exact_mdps = st.tuples(
    st.integers(1, 3), st.integers(2, 3), st.booleans(), st.booleans(),
    st.lists(st.integers(0, 3), min_size=27, max_size=27), st.lists(st.integers(0, 3), min_size=9, max_size=9),
    st.lists(st.integers(0, 3), min_size=12, max_size=12), st.lists(st.integers(-40, 40), min_size=12, max_size=12),
    st.lists(st.integers(-16, 16), min_size=4, max_size=4), st.integers(1, 16), st.integers(0, 2), st.integers(0, 2),
    st.integers(2, 3),
).map(lambda drawn: _small_mdp(drawn[:-1] + (2 if (drawn[0] + drawn[2]) * drawn[1] > 6 else drawn[-1],)))


def mdp_policy_values(mdp: dict) -> np.ndarray:
    """V^π of a :func:`_small_mdp`, solved here with sympy on its live states; a terminal state is worth 0."""
    live = mdp["live"]
    values = exact_policy_values(mdp["P"][:live, :, :live], mdp["R"][:live], mdp["pi"][:live], mdp["gamma"])
    return np.concatenate([values, np.array([Fraction(0)] * (len(mdp["R"]) - live), dtype=object)])


def _path_masks(s: np.ndarray, terminal: int | None) -> tuple[np.ndarray, np.ndarray]:
    """terminated and trace_cut of paths s[0..n] (states by row): a step into the terminal state terminates and cuts
    the trace, and so does the paths' last step (the end of the array)."""
    terminated = (s[1:] == terminal).astype(int) if terminal is not None else np.zeros(s[1:].shape, dtype=int)
    trace_cut = terminated.copy()
    trace_cut[-1] = 1
    return terminated, trace_cut


@verifier(kind="property", uses=("n_step_advantages",))
@given(_small_exact_mdps)
def n_step_tradeoff_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs (discounted with γ < 1, or episodic with γ <= 1, γ = 1 included; stochastic or
    deterministic transitions; 2 or 3 actions), policies and critic errors e = V̂ - V^π, for each horizon
    n up to the drawn one and a drawn (s_0, a_0), with impl's n-step estimate on every n-step path (exact;
    a step into the terminal state flagged terminated):

    - its mean is Q^π(s_0, a_0) - V̂(s_0) + γ^n E[e(s_n); s_n not terminal]: the critic's error enters the
      target only through the bootstrap, with weight γ^n on the episodes still running at step n, a
      weight that never grows with n (and stays 1 until an episode ends when γ = 1);
    - with the exact critic, one more step adds exactly γ^{2n} E[δ_n^2] to its variance
      (δ_n = r_n + γ V^π(s_{n+1}) - V^π(s_n) has mean zero given the past, and is 0 once the episode has
      ended), never less than 0.

    V^π and Q^π are solved here with sympy, independently of impl.
    """
    P, R, pi, gamma, error = (mdp[k] for k in ("P", "R", "pi", "gamma", "error"))
    state, action, terminal = mdp["state"], mdp["action"], mdp["terminal"]
    # A discounted MDP runs forever, an episodic one until its terminal state: both are unbounded horizons.
    reach_mdp(P, gamma=gamma, horizon=math.inf, advantages=["exact", "estimated"])
    values = mdp_policy_values(mdp)
    q_value = R[state, action] + gamma * (P[state, action] * values).sum()
    critics = {"exact": values, "approximate": values + error}
    variances = []
    for n in range(1, mdp["horizon"] + 2):
        states, actions, probability = _n_step_paths(P, pi, state, action, n)
        s = np.array(states).T
        a = np.array(actions).T
        terminated, trace_cut = _path_masks(s, terminal)
        running = s[-1] != terminal if terminal is not None else np.ones(s.shape[1], dtype=bool)
        for name, critic in critics.items():
            estimate = ctx.impl.n_step_advantages(R[s[:-1], a], critic[s[:-1]], critic[s[1:]], terminated,
                                                  trace_cut, gamma, n)[0]
            mean, variance = _mean_and_variance(probability, estimate)
            bootstrap_error = gamma**n * (probability * running * (critic - values)[s[-1]]).sum()
            assert mean == q_value - critic[state] + bootstrap_error, (name, n, mean, q_value, bootstrap_error)
            if name == "exact":
                variances.append((variance, probability, s, a))
    for n in range(1, len(variances)):
        variance, *_ = variances[n - 1]
        longer, probability, s, a = variances[n]
        delta = R[s[n], a[n]] + gamma * values[s[n + 1]] - values[s[n]]
        added = gamma ** (2 * n) * (probability * delta * delta).sum()
        assert longer - variance == added and added >= 0, (n, longer - variance, added)


@verifier(kind="property", uses=("td_errors",))
@given(_small_exact_mdps)
def td_error_mean_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs and policies (:func:`_small_mdp`: discounted with γ < 1, or episodic with γ <= 1,
    γ = 1 included; stochastic or deterministic transitions; 1 to 3 live states, 2 or 3 actions), with
    the critic V^π solved here, the mean over s_{t+1} ~ P(·|s_t, a_t) of impl's TD error at every live
    (s_t, a_t) is A^π(s_t, a_t) = R(s_t, a_t) + γ Σ_{s'} P(s'|s_t, a_t) V^π(s') - V^π(s_t), exactly.

    A step into the terminal state is flagged terminated, and the value stored for that state is a drawn
    number, not its V^π = 0: a critic's output for a terminal observation means nothing, and only the
    flag keeps it out of δ_t.
    """
    P, R, gamma, terminal, live = (mdp[k] for k in ("P", "R", "gamma", "terminal", "live"))
    # V^π of a discounted MDP, or of an episodic one run to its terminal state: an unbounded horizon.
    reach_mdp(P, gamma=gamma, horizon=math.inf, advantages="exact")
    values = mdp_policy_values(mdp)
    stored = values.copy()
    terminated = np.zeros((live, P.shape[1], P.shape[2]), dtype=int)
    if terminal is not None:
        stored[terminal] = mdp["error"][terminal]
        terminated[..., terminal] = 1
    shape = terminated.shape
    delta = ctx.impl.td_errors(np.broadcast_to(R[:live, :, None], shape),
                               np.broadcast_to(values[:live, None, None], shape),
                               np.broadcast_to(stored[None, None, :], shape), terminated, gamma)
    mean = (P[:live] * delta).sum(axis=-1)
    advantage = R[:live] + gamma * (P[:live] * values).sum(axis=-1) - values[:live, None]
    assert np.array_equal(mean, advantage), (mean, advantage)


class TwoChains(NoParams):
    """The same chain with deterministic and with stochastic outcomes."""

    deterministic: Chain
    stochastic: Chain


@verifier(kind="exact", uses=("n_step_advantages",), params=TwoChains)
def long_target_noise_exact(ctx: Context) -> dict[str, object]:
    """The Monte Carlo estimate (n = length, to the episode's end) and the one-step estimate at s_0,
    over every episode of each chain enumerated exactly with impl's n-step estimate: their
    variances, and the bias of their targets (estimate plus V̂(s_0)) as estimates of V^π(s_0)."""
    observed: dict[str, object] = {}
    for name in ("deterministic", "stochastic"):
        chain = getattr(ctx.params, name)
        values = chain_values(chain)
        critic = chain_critic(chain, values)
        reach_chain(chain, advantages="exact" if chain.critic_error == 0 else "estimated")
        rewards, probability = _chain_paths(chain, None)
        observed[f"{name}_episodes"] = len(probability)
        for horizon, n in (("long", chain.length), ("one_step", 1)):
            mean, variance = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, n))
            observed[f"{name}_{horizon}_target_variance"] = variance
            observed[f"{name}_{horizon}_target_bias"] = mean + critic[0] - values[0]
    observed["stochastic_long_minus_one_step_variance"] = (observed["stochastic_long_target_variance"]
                                                           - observed["stochastic_one_step_target_variance"])
    return observed


# -------------------------------------------- 4.3.1, 4.3.4, 4.3.5: the share of variance, truncation, one use per batch


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


def _one_step_gradient(theta: np.ndarray, rewards: np.ndarray, rho: np.ndarray) -> np.ndarray:
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
    gradient = _one_step_gradient(theta, rewards, rho)
    assert_close(_expected_step(ctx, theta, phi, rewards, rho, pi, lr, "current"), gradient,
                 _step_bound(rewards, phi, theta, lr), "the expected step against the collecting policy's gradient")
    changed = theta + lr * gradient
    bound = _step_bound(rewards, phi, changed, lr)
    reused = _expected_step(ctx, changed, phi, rewards, rho, pi, lr, "old")
    assert_close(reused, _old_data_step(changed, rewards, phi, rho, pi), bound,
                 "a reused batch's expected step against the old data's average")
    fresh = _expected_step(ctx, changed, phi, rewards, rho, np.exp(log_softmax(changed)), lr, "current")
    assert_close(fresh, _one_step_gradient(changed, rewards, rho), bound,
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
    changed = theta + lr * _one_step_gradient(theta, rewards, rho)
    new_pi = np.exp(log_softmax(changed))
    target = _one_step_gradient(changed, rewards, rho)
    reused = _expected_step(ctx, changed, phi, rewards, rho, old_pi, lr, "old")
    fresh = _expected_step(ctx, changed, phi, rewards, rho, new_pi, lr, "current")
    bound = _step_bound(rewards, phi, changed, lr)
    gaps = {"single_use": float(np.abs(first - _one_step_gradient(theta, rewards, rho)).max()),
            "reused": float(np.abs(reused - target).max()), "fresh": float(np.abs(fresh - target).max())}
    return {"single_use_step_is_the_gradient": gaps["single_use"] <= bound,
            "reused_batch_step_is_the_new_gradient": gaps["reused"] <= bound,
            "fresh_batch_step_is_the_new_gradient": gaps["fresh"] <= bound,
            "policy_change": float(np.abs(new_pi - old_pi).max()),
            **{f"{name}_gap": gap for name, gap in gaps.items()}, "rounding_bound": bound}
