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
from impl.estimators import reinforce_gradient, score_function_gradient
from impl.gae import gae_advantages, td_errors
from impl.kl import kl_k1, kl_k3
from impl.mdp import (
    TabularMDP,
    Trajectories,
    enumerate_trajectories,
    objective,
    objective_gradient,
    random_mdp,
    sample_trajectories,
    trajectory_score,
    transition_kernel,
)
from impl.policies import bernoulli_logit_score, log_softmax, softmax, softmax_score, tabular_softmax_score
from impl.returns import discounted_objective_weights, discounted_returns, full_return_weights

__all__ = [
    "TabularMDP",
    "Trajectories",
    "baseline_advantages",
    "bernoulli_logit_score",
    "discounted_objective_weights",
    "discounted_returns",
    "enumerate_trajectories",
    "full_return_weights",
    "gae_advantages",
    "group_centered_advantages",
    "group_normalized_advantages",
    "kl_k1",
    "kl_k3",
    "leave_one_out_advantages",
    "log_softmax",
    "objective",
    "objective_gradient",
    "optimal_scalar_baseline",
    "random_mdp",
    "reinforce_gradient",
    "sample_trajectories",
    "score_function_gradient",
    "softmax",
    "softmax_score",
    "state_value_from_q",
    "tabular_softmax_score",
    "td_errors",
    "trajectory_score",
    "transition_kernel",
]
