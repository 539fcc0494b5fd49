"""The critic's loss, explained variance and the on-policy actor-critic loop (module steps 4.3.1, 4.3.5).

The loop runs on a small corridor: states 0..n-1 and a terminal goal n, start in state 0;
"left" and "right" move one step, slipping the other way with a small probability; every step
costs ``step_reward`` and reaching the goal pays ``goal_reward`` and ends the episode. A time
limit truncates long episodes, so one rollout holds terminations, truncations, the buffer's
edge and ordinary steps. The objective J(θ) = Σ_s ρ_0(s) V^{π_θ}(s) of the untruncated
discounted task is computed here by a linear solve, independently of impl.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers._numeric import rounding_bound

# Central differences of a quadratic are exact in exact arithmetic for any step h.
_exact_batches = st.integers(min_value=1, max_value=8).flatmap(
    lambda n: st.tuples(st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                        st.lists(st.integers(-80, 80), min_size=n, max_size=n),
                        st.integers(1, 16)))


@verifier("actor_critic.value_loss_gradient_property",
          uses=("squared_error_value_loss", "squared_error_value_loss_grad"))
def value_loss_gradient_property(ctx: Context) -> dict[str, object]:
    """On random batches of exact predictions and targets, impl's gradient of the critic loss
    equals central finite differences of impl's loss, (L(V + h e_i) - L(V - h e_i)) / 2h, which
    are exact for a quadratic loss at any h; and it is (V - V̂)/N, as the formula says."""

    def matches_differences(batch: tuple) -> None:
        predictions, targets, sixteenths = batch
        v = np.array([Fraction(k, 8) for k in predictions], dtype=object)
        target = np.array([Fraction(k, 8) for k in targets], dtype=object)
        step = Fraction(sixteenths, 16)
        gradient = ctx.impl.squared_error_value_loss_grad(v, target)
        for i in range(len(v)):
            up, down = v.copy(), v.copy()
            up[i] += step
            down[i] -= step
            difference = (ctx.impl.squared_error_value_loss(up, target)
                          - ctx.impl.squared_error_value_loss(down, target)) / (2 * step)
            assert gradient[i] == difference, (i, gradient[i], difference)
            assert gradient[i] == (v[i] - target[i]) / len(v), (i, gradient[i])

    return check_property(ctx, matches_differences, _exact_batches)


_targets = st.integers(min_value=2, max_value=40).flatmap(
    lambda n: st.tuples(hnp.arrays(np.float64, n, elements=st.floats(-100, 100, allow_nan=False)),
                        st.floats(-100, 100, allow_nan=False)))


@verifier("actor_critic.explained_variance_property", uses=("explained_variance",))
def explained_variance_property(ctx: Context) -> dict[str, object]:
    """On random targets that vary, impl's explained variance is exactly 1 for predictions equal to
    the targets and 0 up to rounding for any constant prediction.

    Shifting the targets by a constant c changes each deviation from the mean by a few roundings
    of numbers bounded by M = max|V̂| + |c|; squared in the variance, that is an error of order
    eps M std(V̂) against Var(V̂) = std(V̂)^2 (plus eps M^2 from the squares themselves), so
    Var(V̂ - c) / Var(V̂) - 1 stays within the rounding bound of 4N operations on (M / std(V̂))^2.
    """

    def endpoints(batch: tuple) -> None:
        targets, constant = batch
        spread = float(np.std(targets))
        if spread == 0:
            return
        assert ctx.impl.explained_variance(targets.copy(), targets) == 1, "a perfect critic"
        constant_critic = ctx.impl.explained_variance(np.full_like(targets, constant), targets)
        bound = rounding_bound(4 * len(targets), ((float(np.abs(targets).max()) + abs(constant)) / spread) ** 2)
        assert abs(constant_critic) <= bound, (constant_critic, bound)

    return check_property(ctx, endpoints, _targets)


class Corridor(BaseModel):
    """The corridor and the settings of one actor-critic iteration."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    states: int = Field(ge=1, le=10, description="non-terminal states before the goal")
    slip: float = Field(ge=0, lt=0.5, description="probability of moving the other way")
    step_reward: float = Field(description="reward of every step")
    goal_reward: float = Field(description="extra reward for reaching the goal")
    time_limit: int = Field(ge=1, description="steps after which an episode is truncated")
    gamma: float = Field(gt=0, lt=1, description="the discount γ")
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


def _log_softmax(theta: np.ndarray) -> np.ndarray:
    shifted = theta - theta.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def objective(theta: np.ndarray, mdp: dict[str, np.ndarray], gamma: float) -> float:
    """J(θ) = ρ_0 · V^{π_θ}, with V^{π_θ} from (I - γ P_π) V = R_π (the goal absorbs with reward 0)."""
    pi = np.exp(_log_softmax(theta))
    transition = np.einsum("sa,sat->st", pi, mdp["P"])
    values = np.linalg.solve(np.eye(len(pi)) - gamma * transition, (pi * mdp["R"]).sum(axis=1))
    return float(mdp["rho_0"] @ values)


def _collect(ctx: Context, theta: np.ndarray, phi: np.ndarray, mdp: dict[str, np.ndarray], rng: np.random.Generator
             ) -> object:
    params = ctx.params
    return ctx.impl.collect_rollout(theta, phi, mdp["P"], mdp["R"], mdp["terminal"], mdp["rho_0"],
                                    params.time_limit, params.n_steps, params.n_envs, rng)


def _start(mdp: dict[str, np.ndarray], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random actor and critic, so that no property holds by symmetry of a zero start."""
    n_states = len(mdp["rho_0"])
    return rng.normal(scale=0.5, size=(n_states, 2)), rng.normal(size=n_states)


@verifier("actor_critic.rollout_contents", uses=("collect_rollout",), params=Corridor)
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
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    shape = (ctx.params.n_steps, ctx.params.n_envs)
    names = ("a_t", "log_pi_old_t", "r_t", "v_t", "v_tp1", "terminated_t", "trace_cut_t", "s_t", "s_tp1")
    stored = {name: np.shape(getattr(rollout, name, None)) == shape for name in names}
    if not all(stored.values()):
        return {f"stores_{name}": kept for name, kept in stored.items()}
    s, s_next, a = rollout.s_t, rollout.s_tp1, rollout.a_t
    log_pi = _log_softmax(theta)[s, a]
    terminated = mdp["terminal"][s_next]
    resets = np.zeros(shape, dtype=bool)
    elapsed = np.zeros(shape[1], dtype=int)
    for t in range(shape[0]):
        elapsed += 1
        resets[t] = terminated[t] | (elapsed >= ctx.params.time_limit)
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


def _policy_gradient(theta: np.ndarray, s: np.ndarray, a: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """(1/N) Σ_t Â_t (e_{a_t} - π_θ(·|s_t)) added into row s_t, written out here."""
    pi = np.exp(_log_softmax(theta))
    gradient = np.zeros_like(theta)
    for state, action, advantage in zip(s, a, advantages, strict=True):
        gradient[state] -= advantage * pi[state]
        gradient[state, action] += advantage
    return gradient / len(s)


@verifier("actor_critic.stop_gradient_structure",
          uses=("collect_rollout", "actor_critic_iteration", "gae_advantages", "value_targets",
                "normalize_advantages"),
          params=Corridor)
def stop_gradient_structure(ctx: Context) -> dict[str, object]:
    """The routes of the gradients through impl's actor-critic iteration.

    With the advantages Â computed by impl from the rollout (and normalised, as the iteration
    does for the actor), the actor's step must be the policy-gradient step with Â as fixed
    numbers, and must not change when the critic's parameters handed to the iteration change;
    the critic's step must be the gradient step of ½ mean (φ[s_t] - V̂_t)² with V̂ = V_old + Â
    fixed. The actor's loss does depend on φ through Â (its derivative by φ, with Â recomputed
    from the critic's values, is reported): only the stop-gradient keeps that out of the update.
    """
    params = ctx.params
    mdp = corridor(params)
    theta, phi = _start(mdp, ctx.rng)
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    s, a, s_next = rollout.s_t.reshape(-1), rollout.a_t.reshape(-1), rollout.s_tp1.reshape(-1)

    def advantages_for(critic: np.ndarray) -> np.ndarray:
        return ctx.impl.gae_advantages(rollout.r_t, critic[rollout.s_t], critic[rollout.s_tp1], rollout.terminated_t,
                                       rollout.trace_cut_t, params.gamma, params.gae_lambda)

    advantages = advantages_for(phi)
    actor_advantages = ctx.impl.normalize_advantages(advantages).reshape(-1)
    targets = ctx.impl.value_targets(rollout.v_t, advantages).reshape(-1)
    theta_next, phi_next = ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                           params.actor_lr, params.critic_lr)
    other_theta_next, _ = ctx.impl.actor_critic_iteration(theta, phi + 1.0, rollout, params.gamma,
                                                          params.gae_lambda, params.actor_lr, params.critic_lr)
    actor_step = theta + params.actor_lr * _policy_gradient(theta, s, a, actor_advantages)
    critic_gradient = np.zeros_like(phi)
    np.add.at(critic_gradient, s, (phi[s] - targets) / len(s))
    critic_step = phi - params.critic_lr * critic_gradient
    magnitude = float(np.abs(theta).max() + params.actor_lr * np.abs(actor_advantages).max()
                      + np.abs(phi).max() + params.critic_lr * np.abs(targets).max())
    bound = rounding_bound(4 * len(s), magnitude)

    def actor_loss(critic: np.ndarray) -> float:
        recomputed = ctx.impl.normalize_advantages(advantages_for(critic)).reshape(-1)
        return float(-(recomputed * _log_softmax(theta)[s, a]).mean())

    step = 1e-4
    sensitivity = max(abs(actor_loss(phi + step * e) - actor_loss(phi - step * e)) / (2 * step)
                      for e in np.eye(len(phi))[np.unique(np.concatenate([s, s_next]))])
    # A difference quotient of a loss that ignored φ would be rounding noise of at most this size.
    noise = rounding_bound(4 * len(s), abs(actor_loss(phi))) / step
    return {
        "actor_step_uses_fixed_advantages": bool(np.all(np.abs(theta_next - actor_step) <= bound)),
        "actor_step_ignores_critic_parameters": bool(np.array_equal(theta_next, other_theta_next)),
        "critic_step_uses_critic_loss_alone": bool(np.all(np.abs(phi_next - critic_step) <= bound)),
        "actor_loss_depends_on_critic": bool(sensitivity > noise),
        "actor_loss_sensitivity_to_critic": sensitivity,
    }


@verifier("actor_critic.normalisation_leaves_critic_step", uses=("collect_rollout", "actor_critic_iteration"),
          params=Corridor)
def normalisation_leaves_critic_step(ctx: Context) -> dict[str, object]:
    """impl's iteration with and without advantage normalisation: the critic's step (which follows
    the value targets) must be identical, while the actor's step differs."""
    params = ctx.params
    mdp = corridor(params)
    theta, phi = _start(mdp, ctx.rng)
    rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
    updates = {normalize: ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                          params.actor_lr, params.critic_lr, normalize=normalize)
               for normalize in (True, False)}
    return {"critic_step_unchanged": bool(np.array_equal(updates[True][1], updates[False][1])),
            "actor_step_difference": float(np.abs(updates[True][0] - updates[False][0]).max())}


@verifier("actor_critic.iteration_improves_return", uses=("collect_rollout", "actor_critic_iteration"),
          params=Corridor)
def iteration_improves_return(ctx: Context) -> dict[str, object]:
    """One iteration of impl's loop from the uniform policy and a zero critic, repeated on
    independent rollouts: the exact J before, and J after each run, by a linear solve here.

    Reports the quartiles of the improvement J_after - J_before over the runs and the share of
    runs that improved J.
    """
    params = ctx.params
    mdp = corridor(params)
    theta, phi = np.zeros((len(mdp["rho_0"]), 2)), np.zeros(len(mdp["rho_0"]))
    before = objective(theta, mdp, params.gamma)
    improvements = []
    for _ in range(params.runs[ctx.profile]):
        rollout = _collect(ctx, theta, phi, mdp, ctx.rng)
        theta_next, _ = ctx.impl.actor_critic_iteration(theta, phi, rollout, params.gamma, params.gae_lambda,
                                                        params.actor_lr, params.critic_lr)
        improvements.append(objective(theta_next, mdp, params.gamma) - before)
    lower, median, upper = np.percentile(improvements, [25, 50, 75])
    return {"j_before": before, "runs": len(improvements), "improvement_lower_quartile": float(lower),
            "improvement_median": float(median), "improvement_upper_quartile": float(upper),
            "improvement_min": float(min(improvements)),
            "share_improved": float(np.mean(np.array(improvements) > 0))}
