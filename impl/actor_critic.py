"""A tabular on-policy actor-critic (module lesson 4.3): losses, diagnostics, rollouts, one iteration.

The actor is a softmax policy with one logit per state and action, π_θ(a|s) = softmax(θ[s])_a;
the critic is a table of values, V_φ(s) = φ[s]. Both are the simplest differentiable
parametrisations, so every gradient here has a closed form. The environment is a finite MDP in
the syllabus's arrays ``P[s, a, s2]``, ``R[s, a]`` with a set of true terminal states and a time
limit; rollouts run ``n_envs`` copies in lockstep, time first, as a vectorized rollout buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .estimators import score_function_gradient
from .gae import gae_advantages, normalize_advantages, value_targets
from .policies import log_softmax, tabular_softmax_score
from .ppo_cartpole import sample_categorical


def squared_error_value_loss_grad(v_t: ArrayLike, target_t: ArrayLike) -> np.ndarray:
    """∂L_V/∂V(s_t) = (V(s_t) - V̂_t) / N for L_V = (1/N) Σ_t ½ (V(s_t) - V̂_t)² (module step 4.3.1).

    The gradient of :func:`impl.ppo.squared_error_value_loss` with the targets held fixed; N is
    the length of the first axis, as there. The chain rule gives the gradient in any critic's
    parameters from this one: for the tabular critic, ∂L_V/∂φ[s] sums it over the steps with s_t = s.
    """
    error_t = np.asarray(v_t) - np.asarray(target_t)
    return error_t / error_t.shape[0]


@dataclass(frozen=True)
class Rollout:
    """What one on-policy collection keeps, every array shaped [T, n_envs] (module step 4.3.5).

    Attributes:
      s_t: the state each action was taken in.
      a_t: the actions.
      log_pi_old_t: log π_θold(a_t | s_t) under the policy that collected the data.
      r_t: the rewards that followed.
      s_tp1: the state that followed a_t, before any reset.
      v_t: V_φold(s_t), the critic's prediction when the data was collected.
      v_tp1: V_φold(s_{t+1}) of ``s_tp1``; at a truncation, the last state before the reset.
      terminated_t: 1 where ``s_tp1`` is a true terminal state.
      trace_cut_t: 1 before a reset (termination or time limit) and at the buffer's last step.
    """

    s_t: np.ndarray
    a_t: np.ndarray
    log_pi_old_t: np.ndarray
    r_t: np.ndarray
    s_tp1: np.ndarray
    v_t: np.ndarray
    v_tp1: np.ndarray
    terminated_t: np.ndarray
    trace_cut_t: np.ndarray


def collect_rollout(theta: ArrayLike, phi: ArrayLike, P: ArrayLike, R: ArrayLike, terminal: ArrayLike,
                    rho_0: ArrayLike, time_limit: int, n_steps: int, n_envs: int, rng: np.random.Generator
                    ) -> Rollout:
    """Run π_θ for ``n_steps`` in ``n_envs`` environments that reset on termination or at the time limit.

    Every environment starts from ρ_0. A step into a terminal state terminates the episode; an
    episode that reaches ``time_limit`` steps without terminating is truncated. Both reset the
    environment from ρ_0; the buffer's last step cuts the trace without a reset.

    Args:
      theta: the actor's logits, shape [S, A].
      phi: the critic's values, shape [S].
      P, R: the MDP, shapes [S, A, S] and [S, A].
      terminal: booleans, shape [S]: the true terminal states.
      rho_0: the start distribution, shape [S].
      time_limit: the longest episode, in steps.
      n_steps: transitions per environment, T.
      n_envs: environments run in lockstep.
      rng: the source of randomness.
    """
    theta, phi, P, R = (np.asarray(x, dtype=float) for x in (theta, phi, P, R))
    terminal, rho_0 = np.asarray(terminal, dtype=bool), np.asarray(rho_0, dtype=float)
    fields: dict[str, list[np.ndarray]] = {name: [] for name in Rollout.__dataclass_fields__}
    state = sample_categorical(rng, np.broadcast_to(rho_0, (n_envs, len(rho_0))))
    elapsed = np.zeros(n_envs, dtype=int)
    for step in range(n_steps):
        log_pi = log_softmax(theta[state])
        action = sample_categorical(rng, np.exp(log_pi))
        following = sample_categorical(rng, P[state, action])
        elapsed += 1
        terminated = terminal[following]
        reset = terminated | (elapsed >= time_limit)
        record = {"s_t": state, "a_t": action, "log_pi_old_t": log_pi[np.arange(n_envs), action],
                  "r_t": R[state, action], "s_tp1": following, "v_t": phi[state], "v_tp1": phi[following],
                  "terminated_t": terminated.astype(float),
                  "trace_cut_t": (reset | (step == n_steps - 1)).astype(float)}
        for name, value in record.items():
            fields[name].append(value)
        restart = sample_categorical(rng, np.broadcast_to(rho_0, (n_envs, len(rho_0))))
        state = np.where(reset, restart, following)
        elapsed = np.where(reset, 0, elapsed)
    return Rollout(**{name: np.stack(values) for name, values in fields.items()})


def actor_critic_iteration(theta: ArrayLike, phi: ArrayLike, rollout: Rollout, gamma: float, lambda_: float,
                           actor_lr: float, critic_lr: float, normalize: bool = True
                           ) -> tuple[np.ndarray, np.ndarray]:
    """One on-policy iteration on collected data: GAE, targets, one actor step, one critic step.

    Module step 4.3.5: advantages Â_t by GAE with the rollout's two masks, targets
    V̂_t = V_old(s_t) + Â_t from the unnormalised advantages, then an ascent step along the
    policy-gradient estimate (1/N) Σ_t Â_t ∇_θ log π_θ(a_t|s_t) with the (optionally normalised)
    advantages as fixed numbers, and a descent step on L_V = (1/N) Σ_t ½ (φ[s_t] - V̂_t)² with
    the targets as fixed numbers. Neither model is differentiated through the other: the actor's
    step ignores how Â depends on φ (stop-gradient), and the critic's step comes from L_V alone.

    Args:
      theta, phi: the actor's logits [S, A] and the critic's values [S] that collected ``rollout``.
      rollout: data from :func:`collect_rollout`.
      gamma, lambda_: the discount and the GAE parameter.
      actor_lr, critic_lr: the step sizes.
      normalize: whether to normalise the actor's advantages over the batch.

    Returns:
      the updated (theta, phi).
    """
    theta, phi = np.asarray(theta, dtype=float), np.asarray(phi, dtype=float)
    advantage_t = gae_advantages(rollout.r_t, rollout.v_t, rollout.v_tp1, rollout.terminated_t,
                                 rollout.trace_cut_t, gamma, lambda_)
    target_t = value_targets(rollout.v_t, advantage_t).reshape(-1)
    actor_advantage_t = normalize_advantages(advantage_t) if normalize else advantage_t
    s_t, a_t = rollout.s_t.reshape(-1), rollout.a_t.reshape(-1)
    policy_gradient = score_function_gradient(actor_advantage_t.reshape(-1), tabular_softmax_score(theta, s_t, a_t))
    prediction_gradient = squared_error_value_loss_grad(phi[s_t], target_t)
    critic_gradient = np.bincount(s_t, weights=prediction_gradient, minlength=len(phi))
    return theta + actor_lr * policy_gradient, phi - critic_lr * critic_gradient
