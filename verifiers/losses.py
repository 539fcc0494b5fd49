"""The week-16 exercise's loss module, checked as a trainer uses it: values, and gradients the harness takes.

The syllabus (week16/step-4) asks for scalar losses over a batch of tokens (``reinforce_loss``,
``surrogate_loss``, ``ppo_clip_loss``), their diagnostics (``clip_diagnostics``) and two group
baselines (``mean_baseline``, ``rloo_baseline``); ``docs/implementation-contract.md`` gives their
signatures. A loss is judged by its value and by its gradient with respect to ``logp``, the one
input that carries the graph in training. The gradient is taken here, by central differences of
the implementation's own loss for NumPy code (autograd on its own graph for PyTorch code), never by
gradient code of the implementation: for each coordinate,
(L(x + h e_i) - L(x - h e_i)) / 2h. Its error is at most (h²/6) max|∂³L/∂x_i³| (truncation) plus
δL / h (δL bounds the rounding of one evaluation of L); the third derivative is the expected
loss's, known in closed form below, and h minimises the sum. That sum is the tolerance.

The references are computed here from the definitions (``math.fsum`` for the sums), on random
shapes [B, T], advantages per token or per sequence, and masks (None, or 0/1 with at least one
token).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from pydantic import Field

from claims_harness import Context, NoParams, assume, given, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import EPS, assert_close, rounding_bound

# A linear loss has no truncation error: the step only trades nothing for rounding, so a large one is best.
_LINEAR_STEP = 2.0**-4
# The largest step a curved loss may take: its log-ratios stay within e^(±h) of where they were drawn.
_LARGEST_STEP = 1e-2


def _mask_of(shape: tuple[int, int]) -> st.SearchStrategy[np.ndarray | None]:
    """None, or a 0/1 float mask with at least one token (the first, when the draw gave none)."""
    def at_least_one(mask: np.ndarray) -> np.ndarray:
        if not mask.any():
            mask = mask.copy()
            mask.flat[0] = 1.0
        return mask
    return st.one_of(st.none(), st.arrays(np.float64, shape, elements=st.sampled_from([0.0, 1.0])).map(at_least_one))


def _advantages_of(shape: tuple[int, int]) -> st.SearchStrategy[np.ndarray]:
    """Per token [B, T] or per sequence [B]; never subnormal, since a platform that flushes subnormals to zero
    (XLA on the CPU, GPUs) rightly reads 5e-324 as 0, and the clip's side depends on the advantage's sign."""
    elements = st.floats(-3, 3, allow_subnormal=False)
    return st.one_of(st.arrays(np.float64, shape, elements=elements),
                     st.arrays(np.float64, shape[:1], elements=elements))


# (logp, log-ratio d = logp - logp_old, adv, mask, eps) on a random [B, T].
_token_batches = st.tuples(st.integers(1, 4), st.integers(1, 6)).flatmap(lambda shape: st.tuples(
    st.arrays(np.float64, shape, elements=st.floats(-6, -0.01)),
    st.arrays(np.float64, shape, elements=st.floats(-0.5, 0.5)),
    _advantages_of(shape), _mask_of(shape), st.floats(0.05, 0.5)))


def _per_token(adv: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(adv if adv.shape == shape else adv[:, None], shape)


def _weights(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """Each token's weight in the masked mean: mask / Σ mask."""
    mask_bt = np.ones(shape) if mask is None else mask
    return mask_bt / math.fsum(mask_bt.ravel())


def _masked_mean(x_bt: np.ndarray, mask: np.ndarray | None) -> float:
    mask_bt = np.ones(x_bt.shape) if mask is None else mask
    return math.fsum((mask_bt * x_bt).ravel()) / math.fsum(mask_bt.ravel())


def _scalar(name: str, value: object, shapes: str) -> float:
    """A loss's one number; anything else fails, naming the function, the inputs' shapes and what came back."""
    array = np.asarray(value)
    assert array.shape == () or (array.size == 1 and array.ndim <= 1), \
        f"{name}({shapes}) returned shape {array.shape}: a loss is one number, the masked mean over the batch"
    number = float(array.reshape(()))
    assert math.isfinite(number), f"{name}({shapes}) returned {number}"
    return number


def _shapes(logp: np.ndarray, adv: np.ndarray, mask: np.ndarray | None) -> str:
    return f"logp {logp.shape}, adv {adv.shape}, mask {None if mask is None else mask.shape}"


# Each loss's constants by position: in training they come out of the graph, so a loss must detach them.
_CONSTANTS = {"reinforce_loss": {1: "adv"}, "surrogate_loss": {1: "logp_old", 2: "adv"},
              "ppo_clip_loss": {1: "logp_old", 2: "adv"}}


def _gradient(ctx: Context, name: str, args: tuple, step: float, tied: tuple[int, ...] = ()) -> np.ndarray:
    """The gradient of the implementation's ``name(*args)`` with respect to logp (``args[0]``), taken by the
    harness (``ImplementationView.loss_gradient``: autograd for PyTorch, central differences with ``step`` for
    NumPy); a gradient that reaches one of the loss's constants fails, naming it."""
    constants = _CONSTANTS[name]
    gradient, leaked = ctx.impl.loss_gradient(name, args, 0, step, held=tuple(constants), tied=tied)
    assert not leaked, "; ".join(
        f"{name}: the gradient reaches {constants[index]} (largest |∂L/∂{constants[index]}| = {size:.3g}): detach it, "
        f"a loss treats {constants[index]} as a constant" for index, size in leaked.items())
    return gradient


def _curved_step(evaluation_rounding: float, third: float) -> float:
    """The h minimising (h²/6) third e^h + rounding / h, at most ``_LARGEST_STEP``."""
    return min(float(np.cbrt(3 * evaluation_rounding / max(third, EPS))), _LARGEST_STEP)


def _ratio_gradient_check(ctx: Context, name: str, args: tuple, ratio: np.ndarray, adv_bt: np.ndarray,
                          weights: np.ndarray, flowing: np.ndarray, shapes: str, kinks: tuple[float, ...] = ()) -> None:
    """The harness's gradient of ``name(*args)`` against -w r Â where ``flowing`` (0 elsewhere).

    Along coordinate i the expected loss is -w_i Â_i e^(x_i - x_old,i) (or constant where clipped), so its
    third derivative is at most |w_i Â_i| r_i e^h; one evaluation sums the B T terms |w Â| r e^h. An example
    with a log-ratio within two steps of one of ``kinks`` (where the loss is not smooth) is not used."""
    logp = args[0]
    terms = np.abs(weights * adv_bt) * ratio
    third = float((terms * flowing).max())
    evaluation_rounding = rounding_bound(4 * logp.size + 8, float(terms.sum()) * math.e)
    step = _curved_step(evaluation_rounding, third)
    log_ratio = np.log(ratio)
    assume(all(float(np.abs(log_ratio - kink).min()) > 2 * step for kink in kinks))
    expected = np.where(flowing, -weights * ratio * adv_bt, 0.0)
    bound = step**2 / 6 * third * math.exp(step) + evaluation_rounding / step + rounding_bound(4, float(terms.max()))
    assert_close(_gradient(ctx, name, args, step), expected, bound, f"the gradient of {name} with respect to logp "
                 f"({shapes}; differences' h = {step:.3g}) against the ratio-weighted -mask r Â / Σ mask")


@verifier(kind="property", uses=("reinforce_loss",))
@given(_token_batches)
def reinforce_loss_property(ctx: Context, batch: tuple) -> None:
    """``reinforce_loss(logp, adv, mask)`` is -Σ mask Â logp / Σ mask, and its gradient with respect to
    logp, by central differences, is -mask Â / Σ mask: each sampled token's SFT gradient weighted by
    its advantage. The loss is linear in logp, so the differences have no truncation error; with
    h = 2^-4 their error is the rounding of two evaluations over 2h."""
    logp, _, adv, mask, _ = batch
    reach(tokens=logp.shape[1], advantages="estimated")  # answers of T tokens; Â random numbers
    shapes = _shapes(logp, adv, mask)
    adv_bt, weights = _per_token(adv, logp.shape), _weights(mask, logp.shape)

    def loss(x: np.ndarray) -> float:
        return _scalar("reinforce_loss", ctx.impl.reinforce_loss(x, adv, mask), shapes)

    scale = float(np.abs(weights * adv_bt * logp).sum()) + float(np.abs(weights * adv_bt).sum())
    value, expected = loss(logp), -_masked_mean(adv_bt * logp, mask)
    assert_close(value, expected, rounding_bound(4 * logp.size + 8, scale),
                 f"reinforce_loss({shapes}) against -Σ mask Â logp / Σ mask")
    bound = rounding_bound(4 * logp.size + 8, scale) / _LINEAR_STEP
    assert_close(_gradient(ctx, "reinforce_loss", (logp, adv, mask), _LINEAR_STEP), -weights * adv_bt, bound,
                 f"the gradient of reinforce_loss ({shapes}) against -mask Â / Σ mask")


@verifier(kind="property", uses=("surrogate_loss",))
@given(_token_batches)
def surrogate_loss_property(ctx: Context, batch: tuple) -> None:
    """``surrogate_loss(logp, logp_old, adv, mask)`` is -Σ mask r Â / Σ mask with r = exp(logp - logp_old),
    and its gradient with respect to logp, by central differences with the module's bound, is
    -mask r Â / Σ mask (the ratio-weighted REINFORCE weight), away from θ_old as well as at it."""
    logp, log_ratio, adv, mask, _ = batch
    reach(tokens=logp.shape[1], advantages="estimated", data="old")  # the ratio is against the stored logp_old
    logp_old = logp - log_ratio
    shapes = _shapes(logp, adv, mask)
    adv_bt, weights = _per_token(adv, logp.shape), _weights(mask, logp.shape)
    ratio = np.exp(logp - logp_old)

    def loss(x: np.ndarray) -> float:
        return _scalar("surrogate_loss", ctx.impl.surrogate_loss(x, logp_old, adv, mask), shapes)

    value, expected = loss(logp), -_masked_mean(ratio * adv_bt, mask)
    assert_close(value, expected, rounding_bound(4 * logp.size + 8, float(np.abs(weights * adv_bt).sum()) * 2),
                 f"surrogate_loss({shapes}) against -Σ mask r Â / Σ mask")
    _ratio_gradient_check(ctx, "surrogate_loss", (logp, logp_old, adv, mask), ratio, adv_bt, weights,
                          np.ones(logp.shape, bool), shapes)


def _active(ratio: np.ndarray, adv_bt: np.ndarray, eps: float) -> np.ndarray:
    """Where the clipped branch is strictly the minimum: no gradient flows."""
    return ((adv_bt > 0) & (ratio > 1 + eps)) | ((adv_bt < 0) & (ratio < 1 - eps))


class ClipDefault(NoParams):
    default_epsilon: float = Field(gt=0, lt=1, description="the ε a call without one means: the syllabus's 0.2")


@verifier(kind="property", uses=("ppo_clip_loss",), params=ClipDefault)
@given(_token_batches)
def ppo_clip_loss_property(ctx: Context, batch: tuple) -> None:
    """``ppo_clip_loss(logp, logp_old, adv, eps, mask)`` is -Σ mask min(r Â, clip(r, 1-ε, 1+ε) Â) / Σ mask,
    and its gradient with respect to logp, by central differences, is -mask r Â / Σ mask where the
    unclipped branch is the minimum and 0 where the clip is active. An example with a log-ratio within
    two steps of a band edge log(1 ± ε) is not used (there the loss has a kink the differences would
    straddle). A call without ε is the call with ``default_epsilon``."""
    logp, log_ratio, adv, mask, eps = batch
    reach(tokens=logp.shape[1], advantages="estimated", data="old")
    logp_old = logp - log_ratio
    shapes = _shapes(logp, adv, mask) + f", eps {eps!r}"
    adv_bt, weights = _per_token(adv, logp.shape), _weights(mask, logp.shape)
    ratio = np.exp(logp - logp_old)

    def loss(x: np.ndarray) -> float:
        return _scalar("ppo_clip_loss", ctx.impl.ppo_clip_loss(x, logp_old, adv, eps, mask), shapes)

    clipped = np.clip(ratio, 1 - eps, 1 + eps)
    value, expected = loss(logp), -_masked_mean(np.minimum(ratio * adv_bt, clipped * adv_bt), mask)
    default = ctx.params.default_epsilon
    by_default = _scalar("ppo_clip_loss", ctx.impl.ppo_clip_loss(logp, logp_old, adv, mask=mask), shapes)
    at_default = -_masked_mean(np.minimum(ratio * adv_bt, np.clip(ratio, 1 - default, 1 + default) * adv_bt), mask)
    assert_close(by_default, at_default, rounding_bound(4 * logp.size + 8, float(np.abs(adv_bt).max()) * 2),
                 f"ppo_clip_loss({shapes}) without eps against the loss at eps = {default}")
    assert_close(value, expected, rounding_bound(4 * logp.size + 8, float(np.abs(weights * adv_bt).sum()) * 2),
                 f"ppo_clip_loss({shapes}) against -Σ mask min(r Â, clip(r) Â) / Σ mask")
    _ratio_gradient_check(ctx, "ppo_clip_loss", (logp, logp_old, adv, eps, mask), ratio, adv_bt, weights,
                          ~_active(ratio, adv_bt, eps), shapes, kinks=(math.log1p(eps), math.log1p(-eps)))


@verifier(kind="property", uses=("reinforce_loss", "surrogate_loss", "ppo_clip_loss"))
@given(_token_batches)
def key_test_property(ctx: Context, batch: tuple) -> None:
    """The syllabus's key test on the implementation's own losses: at logp = logp_old the gradients of
    ``surrogate_loss`` and ``ppo_clip_loss`` with respect to logp equal ``reinforce_loss``'s, all three
    taken here by central differences, within the sum of their bounds; and away from logp_old the
    surrogate's gradient is the ratio-weighted -mask r Â / Σ mask, so that a surrogate that is right
    only at θ_old (a gradient Â / r) fails."""
    logp, log_ratio, adv, mask, eps = batch
    reach(tokens=logp.shape[1], advantages="estimated", data="old")
    shapes = _shapes(logp, adv, mask)
    adv_bt, weights = _per_token(adv, logp.shape), _weights(mask, logp.shape)
    at_old = logp.copy()
    scale = float(np.abs(weights * adv_bt * logp).sum()) + float(np.abs(weights * adv_bt).sum())
    reinforce_gradient = _gradient(ctx, "reinforce_loss", (logp, adv, mask), _LINEAR_STEP)
    reinforce_bound = rounding_bound(4 * logp.size + 8, scale) / _LINEAR_STEP
    # reinforce_loss against its own definition first: a wrong one must not read as a wrong surrogate.
    assert_close(reinforce_gradient, -weights * adv_bt, reinforce_bound,
                 f"the gradient of reinforce_loss ({shapes}) against -mask Â / Σ mask")
    # logp_old is handed in as logp itself, as a trainer's first epoch has it: a loss that does not detach it
    # differentiates a constant ratio and gets no gradient at all.
    for name, args in (("surrogate_loss", (logp, at_old, adv, mask)),
                       ("ppo_clip_loss", (logp, at_old, adv, eps, mask))):
        # At r = 1 each ratio stays within e^(±h), inside the clip band (h <= 0.01 < log(1 + ε) for ε >= 0.05).
        terms = np.abs(weights * adv_bt)
        evaluation_rounding = rounding_bound(4 * logp.size + 8, float(terms.sum()) * math.e)
        third = float(terms.max())
        step = _curved_step(evaluation_rounding, third)
        bound = step**2 / 6 * third * math.exp(step) + evaluation_rounding / step + reinforce_bound
        assert_close(_gradient(ctx, name, args, step, tied=(1,)), reinforce_gradient, bound,
                     f"at logp = logp_old ({shapes}) the gradient of {name} against reinforce_loss's")
    _ratio_gradient_check(ctx, "surrogate_loss", (logp, logp - log_ratio, adv, mask), np.exp(log_ratio), adv_bt,
                          weights, np.ones(logp.shape, bool), shapes)


def _fraction(name: str, diagnostics: object, key: str) -> float:
    assert isinstance(diagnostics, Mapping) and key in diagnostics, \
        f"clip_diagnostics returned {type(diagnostics).__name__}: expected a mapping with '{key}'"
    return float(np.asarray(diagnostics[key]).reshape(()))


@verifier(kind="property", uses=("clip_diagnostics",), params=ClipDefault)
@given(_token_batches)
def clip_diagnostics_property(ctx: Context, batch: tuple) -> None:
    """``clip_diagnostics(logp, logp_old, adv, eps, mask)`` gives, over the masked tokens, the share whose
    ratio lies outside [1-ε, 1+ε] (``outside_fraction``) and the share whose clipped branch is strictly
    the minimum (``active_fraction``). Each is k / Σ mask; ratios within 1e-9 of a band edge are not
    drawn, so a correct comparison written another way cannot round to the other side (at an edge
    itself, where exp's last bit decides, either side is right). A call without ε is the call with
    ``default_epsilon``."""
    logp, log_ratio, adv, mask, eps = batch
    ratio = np.exp(log_ratio)
    assume(min(abs(ratio - (1 - eps)).min(), abs(ratio - (1 + eps)).min()) > 1e-9)
    adv_bt = _per_token(adv, logp.shape)
    default = ctx.params.default_epsilon
    assume(min(abs(ratio - (1 - default)).min(), abs(ratio - (1 + default)).min()) > 1e-9)
    reach(tokens=logp.shape[1], advantages="estimated", data="old")
    shapes = _shapes(logp, adv, mask)
    for epsilon, diagnostics in ((eps, ctx.impl.clip_diagnostics(logp, logp - log_ratio, adv, eps, mask)),
                                 (default, ctx.impl.clip_diagnostics(logp, logp - log_ratio, adv, mask=mask))):
        outside = ((ratio < 1 - epsilon) | (ratio > 1 + epsilon)).astype(float)
        active = _active(ratio, adv_bt, epsilon).astype(float)
        for key, expected in (("outside_fraction", _masked_mean(outside, mask)),
                              ("active_fraction", _masked_mean(active, mask))):
            found = _fraction("clip_diagnostics", diagnostics, key)
            assert_close(found, expected, rounding_bound(4, 1.0),
                         f"clip_diagnostics({shapes}, eps {epsilon})['{key}'] against the masked tokens' share")


# Rewards of groups [..., G]: up to two leading axes, scalar rewards or verifiable 0/1 ones.
_reward_groups = st.tuples(st.lists(st.integers(1, 3), max_size=2), st.integers(2, 6), st.booleans()).flatmap(
    lambda spec: st.arrays(np.float64, (*spec[0], spec[1]),
                           elements=st.sampled_from([0.0, 1.0]) if spec[2] else st.floats(-10, 10)))


@verifier(kind="property", uses=("mean_baseline", "rloo_baseline"))
@given(_reward_groups)
def group_baselines_property(ctx: Context, rewards: np.ndarray) -> None:
    """``mean_baseline(rewards)`` gives every answer its group's mean reward, (1/G) Σ_j R_j, and
    ``rloo_baseline(rewards)`` the mean of the others', (1/(G-1)) Σ_{j≠i} R_j, for rewards [..., G]
    with up to two leading axes; both shaped like the rewards, within the rounding of a sum of G terms."""
    groups = rewards.reshape(-1, rewards.shape[-1])
    size = rewards.shape[-1]
    reach(group=size, states=len(groups))  # G answers for each of the prompts along the leading axes
    mean = np.array([[math.fsum(group) / size] * size for group in groups]).reshape(rewards.shape)
    others = np.array([[(math.fsum(group) - r) / (size - 1) for r in group]
                       for group in groups]).reshape(rewards.shape)
    bound = rounding_bound(2 * size + 4, float(np.abs(rewards).max(initial=0.0)))
    for name, expected in (("mean_baseline", mean), ("rloo_baseline", others)):
        found = np.asarray(getattr(ctx.impl, name)(rewards), dtype=float)
        assert found.shape == rewards.shape, f"{name}(rewards {rewards.shape}) returned shape {found.shape}"
        assert_close(found, expected, bound, f"{name}(rewards {rewards.shape})")
