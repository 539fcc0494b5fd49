"""Token log-probabilities, the completion mask, k3 and the token-level clipped loss in TRL's idiom.

A correct alternative to ``impl``'s sequence functions, written from scratch after the structure
of TRL's ``GRPOTrainer`` (``selective_log_softmax``, the completion mask built in
``_generate_and_score_completions``, the per-token KL and ``compute_loss``); every other function
comes from ``impl``. It must pass every claim whose verifiers call the functions below
(``tests/test_correct_alternatives.py``).

- **Log-probabilities by gathering, then normalising.** ``selective_log_softmax`` gathers the
  logit of each label and subtracts the logsumexp over the vocabulary, instead of taking the
  whole log-softmax and gathering from it; the logits of position k score the label at k + 1.
- **The completion mask from the first EOS's index.** TRL finds the first EOS of each completion
  with ``argmax`` over ``completion_ids == eos`` (the completion's length where there is none)
  and keeps the positions up to it, ``arange <= eos_idx``. Here the completion is the row's
  generated tokens, positions p .. p + n - 1, and the mask is shifted to the label indexing.
- **Masked sums by multiplication**, ``(per_token_logps * mask).sum(-1)``.
- **k3 written as TRL writes the per-token KL**, ``exp(x) - x - 1`` with x the log-ratio.
- **The clipped loss per token**: ``coef_1 = exp(logp - old_logp)``, ``coef_2 = clamp(coef_1)``,
  loss -min(coef_1 A, coef_2 A), reduced by the loss type: ``bnpo`` (sum over the batch's tokens
  over their count) is the contract's ``token_mean``, ``grpo`` (each answer's mean, then the mean
  over answers) is ``answer_mean``, and the sum over each answer's tokens averaged over answers
  is ``answer_sum``. The gradient is the one autograd gives ``torch.min`` and ``clamp``: the
  smaller branch's, the mean of the two at a tie, the clamp's zero outside [1-ε, 1+ε].

Everything is float, as in TRL and as the contract allows for these functions.
"""

import numpy as np
from scipy.special import logsumexp

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def token_log_probs(logits, tokens):
    """selective_log_softmax(logits[:, :-1], tokens[:, 1:]): the gathered logit minus the logsumexp."""
    logits = np.asarray(logits, dtype=float)[:, :-1]
    labels = np.asarray(tokens)[:, 1:]
    selected = np.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return selected - logsumexp(logits, axis=-1)


def response_mask(tokens, prompt_length, generated_length, eos_id):
    """1 from the first generated token up to and including the first generated EOS, by its argmax index."""
    tokens = np.asarray(tokens)
    prompt_length, generated_length = np.asarray(prompt_length), np.asarray(generated_length)
    rows, width = tokens.shape
    mask = np.zeros((rows, width - 1))
    for row in range(rows):
        start = int(prompt_length[row])
        completion = tokens[row, start:start + int(generated_length[row])]
        is_eos = completion == eos_id
        eos_idx = int(is_eos.argmax()) if is_eos.any() else len(completion)
        completion_mask = np.arange(len(completion)) <= eos_idx
        mask[row, start - 1:start - 1 + len(completion)] = completion_mask  # label k + 1 sits at entry k
    return mask


def sequence_log_prob(log_pi_t, mask_t):
    """(per_token_logps * mask).sum(-1)."""
    return (np.asarray(log_pi_t, dtype=float) * np.asarray(mask_t, dtype=float)).sum(axis=-1)


def kl_k3(log_ratio):
    """TRL's per_token_kl: exp(x) - x - 1."""
    x = np.asarray(log_ratio, dtype=float)
    return np.exp(x) - x - 1


def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
    """-(reduced -min(coef_1 A, coef_2 A)), with the gradient autograd gives it."""
    log_pi, log_pi_old = np.asarray(log_pi_t, dtype=float), np.asarray(log_pi_old_t, dtype=float)
    mask = np.asarray(mask_t, dtype=float)
    advantages = np.broadcast_to(np.asarray(a_t, dtype=float), log_pi.shape)
    coef_1 = np.exp(log_pi - log_pi_old)
    coef_2 = np.clip(coef_1, 1 - epsilon, 1 + epsilon)
    per_token_loss1, per_token_loss2 = coef_1 * advantages, coef_2 * advantages
    per_token_loss = -np.minimum(per_token_loss1, per_token_loss2)
    answers = mask.shape[0]
    if aggregation == "token_mean":  # loss_type "bnpo"
        weights = mask / max(mask.sum(), 1.0)
    elif aggregation == "answer_mean":  # loss_type "grpo"
        weights = mask / np.maximum(mask.sum(axis=-1, keepdims=True), 1.0) / answers
    elif aggregation == "answer_sum":
        weights = mask / answers
    else:
        raise ValueError(f"unknown aggregation '{aggregation}'; name one of token_mean, answer_mean, answer_sum")
    loss = (per_token_loss * weights).sum()
    # d loss1 / d log π = coef_1 A; the clamp passes coef_1's gradient only inside [1-ε, 1+ε].
    unclipped_grad = coef_1 * advantages
    inside = (coef_1 >= 1 - epsilon) & (coef_1 <= 1 + epsilon)
    clipped_grad = np.where(inside, coef_1 * advantages, 0.0)
    branch_grad = np.where(per_token_loss1 < per_token_loss2, unclipped_grad,
                           np.where(per_token_loss2 < per_token_loss1, clipped_grad,
                                    (unclipped_grad + clipped_grad) / 2))
    return float(-loss), weights * branch_grad
