"""The NumPy reference implementation of Module 4, "Policy gradients: from REINFORCE to PPO".

Small pure functions named after the literature. Claims are checked against this module by
default; ``--impl other.module`` checks any module that offers the same functions instead.
"""

from impl.baselines import (
    baseline_advantages,
    group_centered_advantages,
    group_normalized_advantages,
    leave_one_out_advantages,
    optimal_scalar_baseline,
    state_value_from_q,
)
from impl.estimators import score_function_gradient
from impl.gae import gae_advantages, td_errors
from impl.kl import kl_k1, kl_k3
from impl.policies import bernoulli_logit_score, log_softmax, softmax, softmax_score

__all__ = [
    "baseline_advantages",
    "bernoulli_logit_score",
    "gae_advantages",
    "group_centered_advantages",
    "group_normalized_advantages",
    "kl_k1",
    "kl_k3",
    "leave_one_out_advantages",
    "log_softmax",
    "optimal_scalar_baseline",
    "score_function_gradient",
    "softmax",
    "softmax_score",
    "state_value_from_q",
    "td_errors",
]
