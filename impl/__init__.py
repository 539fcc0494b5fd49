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
from impl.cartpole import VectorCartPole, VectorStep, cartpole_dynamics, cartpole_reset_states, cartpole_terminated
from impl.estimators import reinforce_gradient, score_function_gradient
from impl.gae import gae_advantages, td_errors
from impl.gru import gru_backward, gru_forward, gru_init, gru_sample
from impl.gru_task import plot_gru_training, train_gru_policy, verifiable_reward
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
from impl.mlp import ActorCriticOutput, actor_critic_backward, actor_critic_forward, actor_critic_init, policy_logits
from impl.optim import AdamState, adam_init, adam_update, clip_by_global_norm, global_norm
from impl.policies import bernoulli_logit_score, log_softmax, softmax, softmax_score, tabular_softmax_score
from impl.ppo import (
    ClipDiagnostics,
    categorical_entropy,
    categorical_entropy_grad,
    clip_active,
    clip_diagnostics,
    ppo_clip_objective,
    ppo_clip_objective_grad,
    ppo_total_loss,
    probability_ratios,
    squared_error_value_loss,
    surrogate_objective,
)
from impl.ppo_cartpole import (
    PPOConfig,
    PPORun,
    evaluate_greedy,
    explained_variance,
    learning_curve_figure,
    sample_categorical,
    train_ppo_cartpole,
)
from impl.returns import discounted_objective_weights, discounted_returns, full_return_weights
from impl.sequence import (
    group_mean_advantages,
    grpo_advantages,
    response_mask,
    rloo_advantages,
    sequence_log_prob,
    token_log_probs,
    token_log_probs_vjp,
)
from impl.token_objectives import (
    aggregation_weights,
    kl_penalized_rewards,
    kl_penalty_loss,
    sequence_clipped_surrogate,
    token_clipped_surrogate,
)

__all__ = [
    "ActorCriticOutput",
    "AdamState",
    "ClipDiagnostics",
    "PPOConfig",
    "PPORun",
    "TabularMDP",
    "Trajectories",
    "VectorCartPole",
    "VectorStep",
    "actor_critic_backward",
    "actor_critic_forward",
    "actor_critic_init",
    "adam_init",
    "adam_update",
    "aggregation_weights",
    "baseline_advantages",
    "bernoulli_logit_score",
    "cartpole_dynamics",
    "cartpole_reset_states",
    "cartpole_terminated",
    "categorical_entropy",
    "categorical_entropy_grad",
    "clip_active",
    "clip_by_global_norm",
    "clip_diagnostics",
    "discounted_objective_weights",
    "discounted_returns",
    "enumerate_trajectories",
    "evaluate_greedy",
    "explained_variance",
    "full_return_weights",
    "gae_advantages",
    "global_norm",
    "group_centered_advantages",
    "group_mean_advantages",
    "group_normalized_advantages",
    "grpo_advantages",
    "gru_backward",
    "gru_forward",
    "gru_init",
    "gru_sample",
    "kl_k1",
    "kl_k3",
    "kl_penalized_rewards",
    "kl_penalty_loss",
    "learning_curve_figure",
    "leave_one_out_advantages",
    "log_softmax",
    "objective",
    "objective_gradient",
    "optimal_scalar_baseline",
    "plot_gru_training",
    "policy_logits",
    "ppo_clip_objective",
    "ppo_clip_objective_grad",
    "ppo_total_loss",
    "probability_ratios",
    "random_mdp",
    "reinforce_gradient",
    "response_mask",
    "rloo_advantages",
    "sample_categorical",
    "sample_trajectories",
    "score_function_gradient",
    "sequence_clipped_surrogate",
    "sequence_log_prob",
    "softmax",
    "softmax_score",
    "squared_error_value_loss",
    "state_value_from_q",
    "surrogate_objective",
    "tabular_softmax_score",
    "td_errors",
    "token_clipped_surrogate",
    "token_log_probs",
    "token_log_probs_vjp",
    "train_gru_policy",
    "train_ppo_cartpole",
    "trajectory_score",
    "transition_kernel",
    "verifiable_reward",
]
