"""Pitfall: the actor's loss not stop-gradiented, so its gradient reaches the critic (module step 4.3.1).

``actor_critic_iteration`` differentiates the joint loss L_actor + L_V with respect to the critic
without treating the advantages as constants: Â_t is recomputed from the critic's values
V_φ(s_t), V_φ(s_{t+1}), so the critic's step also descends ∂L_actor/∂φ, with
L_actor = -(1/N) Σ_t Â_t(φ) log π_θ(a_t|s_t) (normalised advantages when the actor uses them).
The critic is then pulled towards values that make the actor's loss small instead of towards its
targets. The actor's step is the reference one.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def actor_critic_iteration(theta, phi, rollout, gamma, lambda_, actor_lr, critic_lr, normalize=True):
    theta_next, phi_next = impl.actor_critic_iteration(theta, phi, rollout, gamma, lambda_, actor_lr, critic_lr,
                                                       normalize=normalize)
    phi = np.asarray(phi, dtype=float)
    log_pi_t = impl.log_softmax(np.asarray(theta, dtype=float))[rollout.s_t, rollout.a_t]

    def actor_loss(critic):
        advantage_t = impl.gae_advantages(rollout.r_t, critic[rollout.s_t], critic[rollout.s_tp1], rollout.terminated_t,
                                     rollout.trace_cut_t, gamma, lambda_)
        if normalize:
            advantage_t = impl.normalize_advantages(advantage_t)
        return float(-(advantage_t * log_pi_t).mean())

    step = 1e-5
    leaked = np.array([(actor_loss(phi + step * e) - actor_loss(phi - step * e)) / (2 * step)
                       for e in np.eye(len(phi))])
    return theta_next, phi_next - critic_lr * leaked
