"""rlax 0.1.9 (DeepMind's RL building blocks, in JAX) under the names of the implementation contract.

Each function below hands its arguments to an rlax function and returns what rlax computed; the
adapter itself only converts arrays (NumPy -> ``jax.numpy`` float64 and back), turns the contract's
masks into rlax's per-step ``discount_t`` and ``lambda_``, and loops or ``jax.vmap``s over the axes
rlax does not batch (its multistep functions take one trajectory, rank 1). JAX computes in float32
unless told otherwise, so importing this module enables 64-bit mode (``jax_enable_x64``): the harness
judges in float64 and gets float64 back. Every result is returned as NumPy data; a JAX array would be
refused by the harness as a value that only pretends to be data.

Conventions (time is the first axis; ``[T]`` or ``[T, n_envs]``; the contract's ``r_t[t]`` is rlax's
r_{t+1}, its ``v_tp1[t]`` rlax's v_{t+1}):

- ``discount_t = gamma * (1 - terminated_t)``: rlax has one discount per step, 0 where nothing is
  bootstrapped.
- ``gae_advantages``: ``truncated_generalized_advantage_estimation`` takes a single ``values``
  array [k + 1], in which values[t + 1] is both V(s_{t+1}) of step t and V(s_t) of step t + 1. That is
  true inside a trace, not across a reset, so the buffer is split after every ``trace_cut_t`` and each
  piece is one rlax call, with ``values = v_t[piece] + [v_tp1[last step of the piece]]``: a piece that
  ends in a truncation (or at the buffer's end) bootstraps from the observation before the reset, one
  that ends in a termination has discount 0 there. rlax starts every piece with a zero advantage after
  its end; there is no way to pass one in, so ``carry=`` is not accepted (what needs it is an unsupported call).
- ``n_step_advantages``: ``n_step_bootstrapped_returns(r_t, discount_t, v_tp1, n, lambda_t)`` with
  ``lambda_t = 1 - trace_cut_t``: a zero lambda stops the n-step sum at a cut and bootstraps there
  (discount permitting); past the buffer's end rlax bootstraps from the last ``v_tp1``. The advantage
  is the target minus ``v_t``, as rlax's own ``td_lambda`` forms its errors.
- ``td_errors``: ``td_learning(v_tm1=v_t, r_t, discount_t, v_t=v_tp1)``, vmapped over every entry.
- ``discounted_returns``: ``discounted_returns(r_t, gamma * ones, v_t=0)`` (the lambda = 1 case of
  ``lambda_returns``) per column; ``full_return_weights`` repeats its first entry, R(tau), over t.
- ``ppo_clip_objective``: minus ``clipped_surrogate_pg_loss`` of a batch of one, vmapped over the
  samples (rlax returns the batch's mean loss); ``ppo_clip_objective_grad`` is JAX's gradient of the
  same with respect to log pi, taken at ratio * exp(x), x = 0, so that the ratio is exactly the one
  given. ``ppo_clip_loss`` (the syllabus's masked loss) is ``clipped_surrogate_pg_loss`` of the
  masked tokens' ratios exp(logp - logp_old), a per-sequence advantage repeated over its tokens: the
  mean over the selected tokens is the contract's sum(mask x) / sum(mask) for a 0/1 mask.
- ``softmax_score``: JAX's gradient with respect to the logits of minus ``policy_gradient_loss`` with
  advantage and weight 1 (the loss is -log pi(a) A w, so that gradient is grad log pi(a)).
- ``categorical_entropy`` and its gradient: minus ``entropy_loss`` of a batch of one row (weight 1).
- ``squared_error_value_loss`` and its gradient: the mean of ``l2_loss`` (0.5 (v - target)^2).

What rlax cannot take: exact arithmetic (JAX has no object dtype). The module declines Fractions
(``__claims_exact_arithmetic__ = False``), so a check that passes them is judged by replay: each call
it makes to the reference in fractions is made here again in float64 and held to the exact answer
within that call's rounding bound; an adapter that converted them to floats itself would turn an
exact check into an inexact one without saying so. The module converts its arrays itself
(``__claims_array_library__ = "numpy"``).

    claims verify --claims-impl examples.rlax_rl --claims-report /tmp/report_rlax --no-cache -n 1 \\
        -k "gae_advantages or n_step_advantages or td_errors"
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import rlax

from impl import *  # noqa: F403  (every contract function rlax has no counterpart of)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose
__claims_array_library__ = "numpy"  # NumPy in and out; the conversions to jax.numpy are made here
__claims_exact_arithmetic__ = False  # JAX has no object dtype: a check in Fractions is skipped

jax.config.update("jax_enable_x64", True)



def _floats(x):
    """A float64 NumPy copy of ``x`` (never Fractions: the module declines them, ``__claims_exact_arithmetic__``)."""
    return np.array(x, dtype=np.float64)


def _columns(r_t, *others):
    """``r_t`` and the per-step arrays broadcast to its shape, each as [T, columns] float64."""
    rewards = _floats(r_t)
    steps = rewards.shape[0]
    return rewards.shape, [a.reshape(steps, -1) for a in
                           (rewards, *(np.array(np.broadcast_to(_floats(x), rewards.shape)) for x in others))]


def _numpy(x):
    return np.array(x, dtype=np.float64)


def _quietly(function, *args):
    # rlax's softmax distribution (inside policy_gradient_loss and entropy_loss) warns that it will move to distrax.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return function(*args)


# rlax's functions are written to be jitted: compiled once per shape (and per n), they run in microseconds instead of
# the tens of milliseconds an eager lax.scan takes. Compiling happens on the first call, never at import.
_gae = jax.jit(rlax.truncated_generalized_advantage_estimation)
_discounted_returns = jax.jit(jax.vmap(lambda r, discount: rlax.discounted_returns(r, discount, 0.0),
                                       in_axes=(1, None), out_axes=1))
_td_learning = jax.jit(jax.vmap(rlax.td_learning))
_n_step_returns = jax.jit(jax.vmap(rlax.n_step_bootstrapped_returns, in_axes=(1, 1, 1, None, 1), out_axes=1),
                          static_argnums=3)
_l2_loss_mean = jax.jit(lambda v, target: jnp.mean(rlax.l2_loss(v, target)))
_l2_loss_mean_grad = jax.jit(jax.grad(lambda v, target: jnp.mean(rlax.l2_loss(v, target))))


def _log_pi(row, action):
    one = jnp.ones(1)
    return -rlax.policy_gradient_loss(row[None], action[None], one, one)


def _entropy_of_row(row):
    return -rlax.entropy_loss(row[None], jnp.ones(1))


def _per_sample_objective(ratio, advantage, epsilon):
    return -rlax.clipped_surrogate_pg_loss(ratio[None], advantage[None], epsilon)


def _objective_at_log_pi(x, ratio, advantage, epsilon):  # log pi moved by x from where the ratio is ``ratio``
    return _per_sample_objective(ratio * jnp.exp(x), advantage, epsilon)


_score = jax.jit(jax.vmap(jax.grad(_log_pi)))
_entropy = jax.jit(jax.vmap(_entropy_of_row))
_entropy_grad = jax.jit(jax.vmap(jax.grad(_entropy_of_row)))
_clip_objective = jax.jit(jax.vmap(_per_sample_objective, in_axes=(0, 0, None)))
_clip_objective_grad = jax.jit(jax.vmap(jax.grad(_objective_at_log_pi), in_axes=(None, 0, 0, None)))
_clip_loss = jax.jit(lambda log_pi, log_pi_old, advantage, epsilon: rlax.clipped_surrogate_pg_loss(
    jnp.exp(log_pi - log_pi_old), advantage, epsilon))

# ----------------------------------------------------------------------------- lesson 4.1: returns


def discounted_returns(r_t, gamma):
    shape, (rewards,) = _columns(r_t)
    returns = _discounted_returns(jnp.asarray(rewards), jnp.full(rewards.shape[0], float(gamma)))
    return _numpy(returns).reshape(shape)


def full_return_weights(r_t, gamma):
    returns = discounted_returns(r_t, gamma)
    return np.broadcast_to(returns[:1], returns.shape).copy()


def softmax_score(z, a):
    logits = _floats(z)
    actions = np.asarray(a, dtype=np.int64)
    width = logits.shape[-1]
    score = _quietly(_score, jnp.asarray(logits.reshape(-1, width)), jnp.asarray(actions.reshape(-1)))
    return _numpy(score).reshape(*actions.shape, width)


# ----------------------------------------------------------------------------- lesson 4.3: TD, n-step, GAE


def td_errors(r_t, v_t, v_tp1, terminated_t, gamma):
    shape, (rewards, values, next_values, terminated) = _columns(r_t, v_t, v_tp1, terminated_t)
    discount = float(gamma) * (1.0 - (terminated != 0))
    errors = _td_learning(*(jnp.asarray(x.reshape(-1)) for x in (values, rewards, discount, next_values)))
    return _numpy(errors).reshape(shape)


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    shape, (rewards, values, next_values, terminated, cuts) = _columns(r_t, v_t, v_tp1, terminated_t, trace_cut_t)
    discount = float(gamma) * (1.0 - (terminated != 0))
    steps, columns = rewards.shape
    advantages = np.empty_like(rewards)
    for column in range(columns):
        start = 0
        for end in sorted({*np.flatnonzero(cuts[:, column] != 0).tolist(), steps - 1}):
            piece = slice(start, end + 1)
            trace_values = np.append(values[piece, column], next_values[end, column])
            advantages[piece, column] = _gae(jnp.asarray(rewards[piece, column]), jnp.asarray(discount[piece, column]),
                                             float(lambda_), jnp.asarray(trace_values))
            start = end + 1
    return advantages.reshape(shape)


def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
    shape, (rewards, values, next_values, terminated, cuts) = _columns(r_t, v_t, v_tp1, terminated_t, trace_cut_t)
    discount = float(gamma) * (1.0 - (terminated != 0))
    goes_on = 1.0 - (cuts != 0)
    targets = _n_step_returns(jnp.asarray(rewards), jnp.asarray(discount), jnp.asarray(next_values), int(n),
                              jnp.asarray(goes_on))
    return (_numpy(targets) - values).reshape(shape)


# ----------------------------------------------------------------------------- critic and entropy


def squared_error_value_loss(v_t, target_t):
    return float(_l2_loss_mean(jnp.asarray(_floats(v_t)), jnp.asarray(_floats(target_t))))


def squared_error_value_loss_grad(v_t, target_t):
    return _numpy(_l2_loss_mean_grad(jnp.asarray(_floats(v_t)), jnp.asarray(_floats(target_t))))


def categorical_entropy(logits):
    z = _floats(logits)
    return _numpy(_quietly(_entropy, jnp.asarray(z.reshape(-1, z.shape[-1])))).reshape(z.shape[:-1])


def categorical_entropy_grad(logits):
    z = _floats(logits)
    return _numpy(_quietly(_entropy_grad, jnp.asarray(z.reshape(-1, z.shape[-1])))).reshape(z.shape)


# ----------------------------------------------------------------------------- lesson 4.4: PPO's clipped surrogate


def ppo_clip_objective(ratio_t, advantage_t, epsilon):
    ratio = _floats(ratio_t)
    advantage = np.broadcast_to(_floats(advantage_t), ratio.shape)
    objective = _clip_objective(jnp.asarray(ratio.reshape(-1)), jnp.asarray(advantage.reshape(-1)), float(epsilon))
    return _numpy(objective).reshape(ratio.shape)


def ppo_clip_objective_grad(ratio_t, advantage_t, epsilon):
    ratio = _floats(ratio_t)
    advantage = np.broadcast_to(_floats(advantage_t), ratio.shape)
    gradient = _clip_objective_grad(0.0, jnp.asarray(ratio.reshape(-1)), jnp.asarray(advantage.reshape(-1)),
                                    float(epsilon))
    return _numpy(gradient).reshape(ratio.shape)


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    log_pi, log_pi_old, advantages = _floats(logp), _floats(logp_old), _floats(adv)
    if advantages.ndim < log_pi.ndim:  # one advantage per sequence, shared by its tokens
        advantages = advantages[..., None]
    advantages = np.broadcast_to(advantages, log_pi.shape)
    kept = np.ones(log_pi.shape, dtype=bool) if mask is None else _floats(mask) != 0
    loss = _clip_loss(*(jnp.asarray(x[kept]) for x in (log_pi, log_pi_old, advantages)), float(eps))
    return float(loss)
