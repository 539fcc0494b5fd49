"""The self-contained CartPole and the PPO run on it (module step 4.4.5, and 4.4.2's ratios in practice).

The bounds terminate strictly: a state on a bound has not yet failed.

The environment is checked against two oracles of the verifiers' own: the cart-pole equations of
motion (Barto, Sutton and Anderson, 1983) integrated here with one explicit Euler step and
Gymnasium CartPole-v1's published constants, which the claim file states as data; and, where
Gymnasium is installed, Gymnasium's CartPole-v1 itself, stepped side by side.

Training runs through the implementation under test: the verifier calls its training loop and
hands it the same view of the implementation, so every building block of the run (environment,
network, GAE, PPO objective, optimiser) is the implementation under test's. Each seed's run is a
task of ``ctx.map_seeds``, which may run it in another process or on a Dask worker. The final
policy is evaluated by the verifiers' own greedy loop, not by the run's own evaluation.
"""

from __future__ import annotations

import importlib
import itertools
import math
from typing import Any

import numpy as np
from pydantic import Field

from claims_harness import ClaimsError, Context, NoParams, SeedRun, check_property, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import assert_close, largest, rounding_bound

LOOP_USES = ("train_ppo_cartpole", "PPOConfig", "VectorCartPole", "actor_critic_init", "actor_critic_forward",
             "actor_critic_backward", "policy_logits", "log_softmax", "softmax_score", "probability_ratios",
             "ppo_clip_objective", "ppo_clip_objective_grad", "ratio_clip_diagnostics", "categorical_entropy",
             "categorical_entropy_grad", "squared_error_value_loss", "squared_error_value_loss_grad", "ppo_total_loss",
             "kl_k3", "gae_advantages", "value_targets", "normalize_advantages", "adam_init", "adam_update",
             "clip_by_global_norm")

# An Euler step is about thirty float64 operations on terms below a hundred in magnitude (forces of
# 10 N, accelerations of tens of m/s²): rounding_bound's allowance for two ways of writing it.
_EULER_STEP_ROUNDING = rounding_bound(30, 100.0)
# The verifiers' greedy evaluation draws its reset states from a stream of its own per seed (445: step 4.4.5).
_EVALUATION_STREAM = 445


class Bounds(NoParams):
    """Gymnasium CartPole-v1's termination bounds."""

    x_threshold: float = Field(gt=0, description="|x| beyond this terminates, m")
    theta_threshold_degrees: float = Field(gt=0, description="|θ| beyond this many degrees terminates")

    @property
    def theta_threshold(self) -> float:
        return self.theta_threshold_degrees * 2 * math.pi / 360


class CartPoleConstants(Bounds):
    """Gymnasium CartPole-v1's published constants (``gymnasium/envs/classic_control/cartpole.py``),
    after Barto, Sutton and Anderson (1983): the harness's data, not the course text's."""

    gravity: float = Field(gt=0, description="g, m/s²")
    cart_mass: float = Field(gt=0, description="m_c, kg (Gymnasium's masscart)")
    pole_mass: float = Field(gt=0, description="m_p, kg (Gymnasium's masspole)")
    half_pole_length: float = Field(gt=0, description="l, half the pole's length, m (Gymnasium's length)")
    force_magnitude: float = Field(gt=0, description="|F|, N: action 1 pushes the cart right, 0 left")
    time_step: float = Field(gt=0, description="τ, s, of the explicit Euler step")


def euler_step(constants: CartPoleConstants, state: np.ndarray, action: np.ndarray) -> np.ndarray:
    """The verifiers' own cart-pole step: the frictionless equations of motion of Barto, Sutton and
    Anderson (1983), written in their form, then one explicit Euler step of length τ.

        θ'' = (g sin θ + cos θ (-F - m_p l θ'² sin θ) / (m_c + m_p)) / (l (4/3 - m_p cos² θ / (m_c + m_p)))
        x'' = (F + m_p l (θ'² sin θ - θ'' cos θ)) / (m_c + m_p)
    """
    c = constants
    x, x_dot, theta, theta_dot = np.asarray(state, dtype=np.float64).T
    force = np.where(np.asarray(action) == 1, c.force_magnitude, -c.force_magnitude)
    total_mass = c.cart_mass + c.pole_mass
    sin, cos = np.sin(theta), np.cos(theta)
    theta_acc = ((c.gravity * sin + cos * (-force - c.pole_mass * c.half_pole_length * theta_dot ** 2 * sin)
                  / total_mass)
                 / (c.half_pole_length * (4.0 / 3.0 - c.pole_mass * cos ** 2 / total_mass)))
    x_acc = (force + c.pole_mass * c.half_pole_length * (theta_dot ** 2 * sin - theta_acc * cos)) / total_mass
    return np.stack([x + c.time_step * x_dot, x_dot + c.time_step * x_acc,
                     theta + c.time_step * theta_dot, theta_dot + c.time_step * theta_acc], axis=-1)


def outside_bounds(constants: Bounds, state: np.ndarray) -> np.ndarray:
    """Gymnasium's termination test: |x| > x_threshold or |θ| > θ_threshold (strict), per row."""
    state = np.asarray(state, dtype=np.float64)
    return (np.abs(state[:, 0]) > constants.x_threshold) | (np.abs(state[:, 2]) > constants.theta_threshold)


def observation_tolerance(reference: np.ndarray) -> np.ndarray:
    """How far an observation of the state ``reference`` may be from it: one float32 unit in the last
    place (Gymnasium's observations are float32 roundings of a float64 state), plus the float64
    rounding of an Euler step written another way."""
    return np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64) + _EULER_STEP_ROUNDING


def _errors_in_tolerances(observed: np.ndarray, reference: np.ndarray) -> float:
    """The largest |observed - reference| in units of the tolerance (at most 1 passes)."""
    if observed.size == 0:
        return 0.0
    return float(np.max(np.abs(np.asarray(observed, dtype=np.float64) - reference)
                        / observation_tolerance(reference)))


def _clearly_inside(constants: Bounds, observation: np.ndarray) -> np.ndarray:
    """Rows whose (float32) observation is inside the bounds by more than its own rounding."""
    observation = np.asarray(observation, dtype=np.float64)
    margin = observation_tolerance(observation)
    return ((np.abs(observation[:, 0]) + margin[:, 0] <= constants.x_threshold)
            & (np.abs(observation[:, 2]) + margin[:, 2] <= constants.theta_threshold))


# --------------------------------------------------------------------------- the environment


class EquationsOfMotion(CartPoleConstants):
    reset_bound: float = Field(gt=0, description="initial state components are uniform in [-b, b)")
    max_velocity: float = Field(gt=0, description="|ẋ| (m/s) and |θ̇| (rad/s) of the drawn states")


@st.composite
def _states_and_actions(draw: Any, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """A batch of states an environment can be in before a step (inside the bounds: a state beyond
    them has been reset; bounds themselves included), a few steps of actions, a seed for resets."""
    n_envs, n_steps = draw(st.integers(1, 16)), draw(st.integers(1, 4))
    unit = draw(st.arrays(np.float64, (n_envs, 4), elements=st.floats(-1.0, 1.0)))
    actions = draw(st.arrays(np.int64, (n_steps, n_envs), elements=st.integers(0, 1)))
    return unit * bounds, actions, draw(st.integers(0, 2**32))


@verifier(kind="property", uses=("VectorCartPole", "cartpole_dynamics"), params=EquationsOfMotion)
def step_matches_equations_property(ctx: Context) -> dict[str, object]:
    """impl's VectorCartPole, the class the PPO loop steps, against the verifiers' own Euler step of
    the equations of motion with the stated constants, a few steps from random states inside the
    bounds: each step's final observation is the equations' next state (within one float32 unit in
    the last place); the reward is +1 on every step, the terminating one included; ``terminated``
    holds exactly where that next state is beyond the x or θ bound; ``truncated`` never holds so far
    from the time limit; an ended environment restarts inside the reset range and the others
    continue from the next state. impl's ``cartpole_dynamics`` is held to the same equations.
    """
    constants = ctx.params
    bounds = np.array([constants.x_threshold, constants.max_velocity, constants.theta_threshold,
                       constants.max_velocity])
    worst = {"final_observation": 0.0, "dynamics": 0.0}

    def steps_as_the_equations_say(case: tuple[np.ndarray, np.ndarray, int]) -> None:
        state, actions, reset_seed = case
        reach(transitions="deterministic")  # the oracle, euler_step, is a function of the state and the action
        env = ctx.impl.VectorCartPole(state.shape[0], np.random.default_rng(reset_seed))
        env.state = state.copy()
        dynamics_error = _errors_in_tolerances(ctx.impl.cartpole_dynamics(state, actions[0]),
                                               euler_step(constants, state, actions[0]))
        worst["dynamics"] = largest([worst["dynamics"], dynamics_error])
        assert dynamics_error <= 1, f"cartpole_dynamics is {dynamics_error:.3g} tolerances from the equations"
        for action in actions:
            expected = euler_step(constants, state, action)
            step = env.step(action)
            error = _errors_in_tolerances(step.final_observation, expected)
            worst["final_observation"] = largest([worst["final_observation"], error])
            assert error <= 1, f"the final observation is {error:.3g} tolerances from the equations' next state"
            ended = outside_bounds(constants, expected)
            assert np.array_equal(np.asarray(step.terminated, dtype=bool), ended), (step.terminated, expected)
            assert not np.any(step.truncated), step.truncated
            assert np.all(np.asarray(step.reward) == 1.0), step.reward
            observation = np.asarray(step.observation, dtype=np.float64)
            assert np.all(np.abs(observation[ended]) <= constants.reset_bound), observation[ended]
            assert_close(observation[~ended], expected[~ended], observation_tolerance(expected[~ended]),
                         "the observation of an environment that continues, against the equations' next state")
            # Continue from exactly the state the equations reached, so that rounding never accumulates.
            state = np.where(ended[:, None], observation, expected)
            env.state = state.copy()

    observed: dict[str, object] = check_property(ctx, steps_as_the_equations_say, _states_and_actions(bounds))
    return {**observed, "max_final_observation_error_in_tolerances": worst["final_observation"],
            "max_dynamics_error_in_tolerances": worst["dynamics"]}


class TimeLimitEpisodes(Bounds):
    n_envs: int = Field(ge=1, description="environments stepped together")
    steps: int = Field(ge=1, description="steps of the whole run, enough for two time limits per environment")
    random_action_share: float = Field(ge=0, le=1, description="share of actions drawn at random instead of "
                                                               "by the balancing controller")


def _balancing_actions(rng: np.random.Generator, observation: np.ndarray, random_share: float) -> np.ndarray:
    """Push towards where the pole is falling (θ + θ̇/2 > 0: right), which keeps it up for the whole time
    limit, except for a share of random actions that ends some episodes early."""
    observation = np.asarray(observation, dtype=np.float64)
    actions = (observation[:, 2] + 0.5 * observation[:, 3] > 0).astype(np.int64)
    at_random = rng.random(actions.size) < random_share
    actions[at_random] = rng.integers(0, 2, size=int(at_random.sum()))
    return actions


@verifier(kind="property", uses=("VectorCartPole",), params=TimeLimitEpisodes)
def time_limit_from_reset(ctx: Context) -> dict[str, object]:
    """impl's VectorCartPole from its own reset, driven by a balancing controller with some random
    actions for long enough that most environments reach the time limit twice: the lengths of the
    episodes that ended truncated, the longest episode, how many truncations followed a truncation in
    the same environment (the step count restarts), and the terminations whose final observation
    was inside both bounds (a time limit reported as termination).
    """
    limits = ctx.params
    reset_rng, action_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(ctx.seed).spawn(2))
    env = ctx.impl.VectorCartPole(limits.n_envs, reset_rng)
    running = np.zeros(limits.n_envs, dtype=np.int64)
    previous_truncated = np.zeros(limits.n_envs, dtype=bool)
    truncated_lengths, terminated_lengths = [], []
    truncations_after_truncation = terminated_inside = 0
    observation = env.observation()
    for _ in range(limits.steps):
        step = env.step(_balancing_actions(action_rng, observation, limits.random_action_share))
        running += 1
        terminated = np.asarray(step.terminated, dtype=bool)
        truncated = np.asarray(step.truncated, dtype=bool)
        terminated_inside += int(np.sum(terminated & _clearly_inside(limits, step.final_observation)))
        truncated_lengths += running[truncated].tolist()
        terminated_lengths += running[terminated & ~truncated].tolist()
        truncations_after_truncation += int(np.sum(truncated & previous_truncated))
        ended = terminated | truncated
        previous_truncated[ended] = truncated[ended]
        running[ended] = 0
        observation = step.observation
    reach(horizon=[*truncated_lengths, *terminated_lengths])  # the decisions of each episode that ended
    return {
        "truncated_episode_lengths": sorted(set(truncated_lengths)),
        "longest_episode": int(max([*truncated_lengths, *terminated_lengths, *running.tolist()])),
        "truncated_episodes": len(truncated_lengths),
        "terminated_episodes": len(terminated_lengths),
        "truncations_after_a_truncation": truncations_after_truncation,
        "terminated_inside_bounds": terminated_inside,
    }


class GymnasiumComparison(CartPoleConstants):
    one_step_states: int = Field(ge=1, description="random states stepped once by both environments")
    max_velocity: float = Field(gt=0, description="|ẋ| (m/s) and |θ̇| (rad/s) of those states")
    episodes: int = Field(ge=1, description="whole episodes stepped side by side from Gymnasium's reset")
    random_action_share: float = Field(ge=0, le=1, description="share of random actions in those episodes")


def _import_gymnasium() -> Any:
    try:
        return importlib.import_module("gymnasium")
    except ImportError:
        raise ClaimsError("gymnasium is not installed: this check steps Gymnasium's CartPole-v1 beside the "
                          "implementation's environment, and the release gate requires it; install it with "
                          "pip install -e '.[gym]'") from None


def _gymnasium_constants_differing(constants: CartPoleConstants, cartpole: Any) -> list[str]:
    """Names of the stated constants that Gymnasium's CartPoleEnv does not have, or has with another value."""
    pairs = {"gravity": "gravity", "cart_mass": "masscart", "pole_mass": "masspole", "half_pole_length": "length",
             "force_magnitude": "force_mag", "time_step": "tau", "x_threshold": "x_threshold",
             "theta_threshold_degrees": "theta_threshold_radians"}
    stated = constants.model_dump() | {"theta_threshold_degrees": constants.theta_threshold}
    differing = [name for name, theirs in pairs.items() if getattr(cartpole, theirs, None) != stated[name]]
    return differing + ([] if getattr(cartpole, "kinematics_integrator", None) == "euler" else ["integrator"])


@verifier(kind="property", uses=("VectorCartPole",), params=GymnasiumComparison)
def matches_gymnasium(ctx: Context) -> dict[str, object]:
    """impl's VectorCartPole beside Gymnasium's registered CartPole-v1 (its TimeLimit wrapper
    included), from the same states with the same actions: one step from random states inside the
    bounds, then whole episodes from Gymnasium's reset (impl's state set to Gymnasium's before every
    step, so that rounding never accumulates, while impl's own step count runs on across its resets),
    comparing observation (within one float32 unit in the last place), reward, terminated and
    truncated at every step. Also reported: whether the stated constants and the verifiers' own Euler
    step agree with Gymnasium's, and CartPole-v1's registered time limit and reward threshold.
    """
    gymnasium = _import_gymnasium()
    constants = ctx.params
    gym_env = gymnasium.make("CartPole-v1")
    cartpole = gym_env.unwrapped
    mismatches: list[str] = []
    worst_error = 0.0

    # One step from random states, through the unwrapped environment (no time limit involved).
    bounds = np.array([constants.x_threshold, constants.max_velocity, constants.theta_threshold,
                       constants.max_velocity])
    states = ctx.rng.uniform(-bounds, bounds, size=(constants.one_step_states, 4))
    actions = ctx.rng.integers(0, 2, size=constants.one_step_states)
    gym_env.reset(seed=ctx.seed % 2**32)
    gym_next, gym_steps = np.empty_like(states), []
    for i, (state, action) in enumerate(zip(states, actions, strict=True)):
        cartpole.state, cartpole.steps_beyond_terminated = state.copy(), None
        _, reward, terminated, _, _ = cartpole.step(int(action))
        gym_next[i] = cartpole.state
        gym_steps.append((float(reward), bool(terminated)))
    env = ctx.impl.VectorCartPole(constants.one_step_states, np.random.default_rng(ctx.seed))
    env.state = states.copy()
    step = env.step(actions)
    worst_error = largest([worst_error, _errors_in_tolerances(step.final_observation, gym_next)])
    flags = list(zip(np.asarray(step.reward, dtype=float).tolist(),
                     np.asarray(step.terminated, dtype=bool).tolist(), strict=True))
    mismatches += [f"one step from state {states[i].tolist()}, action {actions[i]}: impl's (reward, terminated) "
                   f"{flags[i]}, Gymnasium's {gym_steps[i]}" for i in range(len(flags)) if flags[i] != gym_steps[i]]
    mismatches += [f"one step from state {states[i].tolist()}: impl truncated" for i in np.flatnonzero(step.truncated)]
    one_step_terminations = sum(terminated for _, terminated in gym_steps)
    oracle_agrees = bool(np.all(np.abs(euler_step(constants, states, actions) - gym_next) <= _EULER_STEP_ROUNDING))

    # Whole episodes: one impl environment throughout, so its step count must restart at each of its resets.
    env = ctx.impl.VectorCartPole(1, np.random.default_rng(ctx.seed + 1))
    lengths, truncated_at, terminated_at, steps_compared = [], [], [], 0
    for episode in range(constants.episodes):
        observation, _ = gym_env.reset(seed=(ctx.seed + episode) % 2**32)
        for length in itertools.count(1):
            action = int(_balancing_actions(ctx.rng, observation[None, :], constants.random_action_share)[0])
            env.state = np.array(cartpole.state, dtype=np.float64)[None, :]
            observation, reward, terminated, truncated, _ = gym_env.step(action)
            step = env.step(np.array([action]))
            steps_compared += 1
            worst_error = max(worst_error, _errors_in_tolerances(step.final_observation[0], np.asarray(cartpole.state)))
            ours = (float(step.reward[0]), bool(step.terminated[0]), bool(step.truncated[0]))
            if ours != (float(reward), bool(terminated), bool(truncated)):
                mismatches.append(f"episode {episode}, step {length}: impl's (reward, terminated, truncated) {ours}, "
                                  f"Gymnasium's {(float(reward), bool(terminated), bool(truncated))}")
            if terminated or truncated or ours[1] or ours[2]:
                break
        lengths.append(length)
        if truncated:
            truncated_at.append(length)
        elif terminated:
            terminated_at.append(length)
    gym_env.close()
    reach(horizon=lengths)
    differing = _gymnasium_constants_differing(constants, cartpole)
    return {
        "gymnasium_version": gymnasium.__version__,
        "constants_match_gymnasium": not differing,
        "constants_differing": differing,
        "equations_agree_with_gymnasium": oracle_agrees,
        "gymnasium_max_episode_steps": gym_env.spec.max_episode_steps,
        "gymnasium_reward_threshold": gym_env.spec.reward_threshold,
        "steps_compared": steps_compared + constants.one_step_states,
        "mismatched_steps": len(mismatches),
        "mismatches": mismatches[:10],
        "max_observation_error_in_tolerances": worst_error,
        "episode_lengths": lengths,
        "one_step_terminations": one_step_terminations,
        "episodes_truncated": len(truncated_at),
        "episodes_terminated": len(terminated_at),
    }


# --------------------------------------------------------------------------- training


def greedy_returns(impl: Any, params: dict[str, np.ndarray], episodes: int, seed: int) -> np.ndarray:
    """The verifiers' own evaluation: the returns of ``episodes`` fresh episodes of impl's CartPole, one
    per environment, each acting by the argmax of impl's policy logits until its first end (the
    environment resets after it, and what follows is not counted)."""
    env = impl.VectorCartPole(episodes, np.random.default_rng([seed, _EVALUATION_STREAM]))
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        step = env.step(np.argmax(impl.policy_logits(params, env.observation()), axis=-1))
        returns += np.asarray(step.reward) * running
        running &= ~(np.asarray(step.terminated, dtype=bool) | np.asarray(step.truncated, dtype=bool))
    return returns


def _reach_ppo_run(impl: Any, run: Any, final_returns: np.ndarray | None = None) -> None:
    """What one seed's PPO run computed with: its discount, the actions its policy chooses among, the lengths of
    the verifiers' evaluation episodes (+1 per step, so a return is a length), advantages estimated by GAE with the
    run's critic (impl's gae_advantages, in LOOP_USES) and ratios against the rollout's stored π_old. Called in the
    verifier's own process: the seeds' processes record nothing."""
    observation = impl.VectorCartPole(1, np.random.default_rng(0)).observation()
    actions = np.shape(impl.policy_logits(run.params, observation))[-1]
    reach(discount=run.config.gamma, actions=actions, advantages="estimated", data="old")
    if final_returns is not None:
        reach(horizon=np.asarray(final_returns))


def _train_ppo(run: SeedRun, total_env_steps: int, eval_every: int) -> object:
    """One seed's PPO run with the implementation's default hyperparameters, wherever the seed runs."""
    config = run.impl.PPOConfig(total_env_steps=total_env_steps, eval_every=eval_every)
    return run.impl.train_ppo_cartpole(config, run.seed, run.impl)


def _train_and_evaluate(run: SeedRun, total_env_steps: int, eval_every: int, final_eval_episodes: int,
                        changes: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """One seed's PPO run (the default hyperparameters but ``changes``) and the returns of its final
    greedy policy over ``final_eval_episodes`` episodes, by the verifiers' own evaluation."""
    config = run.impl.PPOConfig(total_env_steps=total_env_steps, eval_every=eval_every, **changes)
    trained = run.impl.train_ppo_cartpole(config, run.seed, run.impl)
    return trained, greedy_returns(run.impl, trained.params, final_eval_episodes, run.seed)


class TrainingBudget(NoParams):
    """The seeds, budget and evaluation of a multi-seed PPO run; hyperparameters are the
    implementation's ``PPOConfig`` defaults."""

    seeds: list[int] = Field(min_length=1, description="one run per seed, fixed per profile")
    total_env_steps: int = Field(ge=256, description="environment steps of each run")
    eval_every: int = Field(ge=0, description="the run's own evaluation after every this many iterations "
                                              "(the learning curve)")
    final_eval_episodes: int = Field(100, ge=1, description="episodes of the verifiers' greedy evaluation of each "
                                                            "seed's final policy")
    solved_return: float | None = Field(None, description="a seed whose final mean return reaches this counts as "
                                                          "solved (Gymnasium CartPole-v1's reward threshold)")
    figure: str | None = Field(None, pattern=r"^[a-z0-9-]+$", description="file name of the learning-curve figure")
    random_episodes: int = Field(100, ge=1, description="episodes of the uniformly random policy, for scale")


def _random_policy_returns(ctx: Context, episodes: int) -> np.ndarray:
    env = ctx.impl.VectorCartPole(episodes, ctx.rng)
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        step = env.step(ctx.rng.integers(0, 2, size=episodes))
        returns += step.reward * running
        running &= ~(step.terminated | step.truncated)
    return returns


def _median_or_none(values: list[float | None]) -> float | None:
    """The median with unsolved runs counted as never solving (+inf); None if most never solved."""
    median = float(np.median([math.inf if v is None else v for v in values]))
    return median if math.isfinite(median) else None


@verifier(kind="experiment", uses=(*LOOP_USES, "learning_curve_figure"), params=TrainingBudget)
def ppo_training_experiment(ctx: Context) -> dict[str, object]:
    """Train impl's PPO on impl's CartPole once per seed, then evaluate each seed's final policy
    greedily on ``final_eval_episodes`` fresh episodes by the verifiers' own loop. Reported: each
    seed's mean return over those episodes, :func:`training_statistics` of them, the run's own last evaluation, when
    each run's own evaluation first reached 475 (environment steps, wall seconds), a random policy's
    mean return for scale, and the learning-curve figure drawn by the implementation's own code.
    """
    params = ctx.params
    config = ctx.impl.PPOConfig(total_env_steps=params.total_env_steps, eval_every=params.eval_every)
    results = ctx.map_seeds(_train_and_evaluate, params.seeds, params.total_env_steps, params.eval_every,
                            params.final_eval_episodes, {})
    runs = [run for run, _ in results]
    for run, returns in results:
        _reach_ppo_run(ctx.impl, run, returns)
    finals = [float(returns.mean()) for _, returns in results]
    tracked = ("value_loss", "entropy", "kl_k3", "grad_norm", "explained_variance")
    observed = {
        **training_statistics(finals, params.solved_return),
        "final_returns": finals,
        "worst_final_episode": [float(returns.min()) for _, returns in results],
        "final_eval_episodes_per_seed": params.final_eval_episodes,
        "seeds": list(params.seeds),
        "random_policy_return": float(_random_policy_returns(ctx, params.random_episodes).mean()),
        "own_final_eval_return": [run.final_eval_return for run in runs],
        "solved_at_env_steps": [run.solved_at_env_steps for run in runs],
        "solved_at_seconds": [None if run.solved_at_seconds is None else round(run.solved_at_seconds, 3)
                              for run in runs],
        "median_solved_at_env_steps": _median_or_none([run.solved_at_env_steps for run in runs]),
        "median_solved_at_seconds": _median_or_none([run.solved_at_seconds for run in runs]),
        "seconds_per_run": [round(run.seconds, 3) for run in runs],
        "losses_finite": all(bool(np.all(np.isfinite(run.diagnostics[name]))) for run in runs for name in tracked),
        "last_iteration": [{name: float(values[-1]) for name, values in run.diagnostics.items()} for run in runs],
        "hyperparameters": {name: getattr(config, name) for name in config.__dataclass_fields__},
    }
    if params.figure:
        title = f"PPO on CartPole: {len(runs)} seeds, {ctx.profile} profile"
        observed["figure"] = ctx.save_figure(ctx.impl.learning_curve_figure(runs, title), params.figure)
    return observed


def training_statistics(final_returns: list[float], solved_return: float | None) -> dict[str, object]:
    """What the claim states of the seeds' final mean returns: their median and interquartile range
    (numpy's linear percentiles), and how many reach ``solved_return`` when it is given."""
    finals = np.asarray(final_returns, dtype=np.float64)
    q25, median, q75 = (float(q) for q in np.percentile(finals, [25, 50, 75]))
    statistics: dict[str, object] = {"median_final_return": median, "iqr_final_return": [q25, q75]}
    if solved_return is not None:
        statistics["seeds_solved"] = int(np.sum(finals >= solved_return))
    return statistics


class OneDetailChanged(NoParams):
    """The same PPO twice per seed: the implementation's defaults, and the defaults with ``changed``."""

    seeds: list[int] = Field(min_length=1, description="the same seeds for both runs, fixed per profile")
    total_env_steps: int = Field(ge=256, description="environment steps of each run")
    changed: dict[str, bool | int | float] = Field(min_length=1, description="PPOConfig fields set otherwise than "
                                                                             "by default in the changed run")
    final_eval_episodes: int = Field(ge=1, description="episodes of the verifiers' greedy evaluation of each final "
                                                       "policy")


@verifier(kind="experiment", uses=LOOP_USES, params=OneDetailChanged)
def one_detail_changed_experiment(ctx: Context) -> dict[str, object]:
    """Train impl's PPO on the same seeds twice, with its default configuration and with one detail
    changed, and compare seed by seed. The outcome: each final greedy policy's mean return over
    ``final_eval_episodes`` episodes (the verifiers' own evaluation), the median of each arm over
    seeds, the difference of the medians (default minus changed) and the number of seeds on which
    the default run ends higher. How far the updates move the policy: each run's median over
    iterations of k3 KL between the rollout's policy and the updated one (the run's own diagnostic),
    and the median over seeds of the ratio changed / default. Both arms of a seed start from the
    same parameters and collect the same first rollout, so with one iteration that ratio compares
    two updates of the same data.
    """
    params = ctx.params
    arms = {name: ctx.map_seeds(_train_and_evaluate, params.seeds, params.total_env_steps, 0,
                                params.final_eval_episodes, changes)
            for name, changes in (("default", {}), ("changed", dict(params.changed)))}
    for results in arms.values():
        for run, returns in results:
            _reach_ppo_run(ctx.impl, run, returns)
    finals = {name: [float(returns.mean()) for _, returns in results] for name, results in arms.items()}
    kl = {name: [float(np.median(run.diagnostics["kl_k3"])) for run, _ in results] for name, results in arms.items()}
    # Both arms of a seed start alike: a run that differs anywhere shows that the loop honours the changed detail.
    differ = [any(not np.array_equal(default.diagnostics[name], changed.diagnostics[name], equal_nan=True)
                  for name in ("kl_k3", "loss", "grad_norm"))
              for (default, _), (changed, _) in zip(arms["default"], arms["changed"], strict=True)]
    return {
        "seeds_where_runs_differ": int(sum(differ)),
        "default_final_returns": finals["default"],
        "changed_final_returns": finals["changed"],
        "seeds": list(params.seeds),
        "default_kl_per_iteration": kl["default"],
        "changed_kl_per_iteration": kl["changed"],
        **detail_statistics(finals["default"], finals["changed"], kl["default"], kl["changed"]),
        "changed": dict(params.changed),
    }


def detail_statistics(default_finals: list[float], changed_finals: list[float], default_kl: list[float],
                      changed_kl: list[float]) -> dict[str, object]:
    """What the claim states of the two arms, seed by seed: each arm's median final return, the difference of
    the medians (default minus changed), the seeds on which the default ends higher, and the median KL ratio."""
    default, changed = np.asarray(default_finals, dtype=np.float64), np.asarray(changed_finals, dtype=np.float64)
    medians = float(np.median(default)), float(np.median(changed))
    return {
        "default_median_final_return": medians[0],
        "changed_median_final_return": medians[1],
        "median_final_return_difference": medians[0] - medians[1],
        "seeds_where_default_ends_higher": int(np.sum(default > changed)),
        "median_kl_ratio": float(np.median(np.asarray(changed_kl) / np.asarray(default_kl))),
    }


class ShortRuns(NoParams):
    seeds: list[int] = Field(min_length=1, description="one short run per seed")
    total_env_steps: int = Field(ge=256, description="environment steps of each run")


@verifier(kind="experiment", uses=LOOP_USES, params=ShortRuns)
def ratios_in_training(ctx: Context) -> dict[str, object]:
    """Train impl's PPO briefly once per seed and read each run's own diagnostics after each
    iteration's epochs: the fraction of the batch's ratios outside [1-ε, 1+ε], the fraction clipped,
    and k3 KL; per seed their largest values over the iterations, and :func:`ratio_statistics` of them."""
    config = ctx.impl.PPOConfig(total_env_steps=ctx.params.total_env_steps, eval_every=0)
    runs = ctx.map_seeds(_train_ppo, ctx.params.seeds, ctx.params.total_env_steps, 0)
    for run in runs:
        _reach_ppo_run(ctx.impl, run)
    outside = [float(run.diagnostics["ratio_outside_fraction"].max()) for run in runs]
    kl = [float(run.diagnostics["kl_k3"].max()) for run in runs]
    return {
        "epochs_per_iteration": config.n_epochs,
        "clip_epsilon": config.clip_epsilon,
        "iterations": [int(run.diagnostics["ratio_outside_fraction"].size) for run in runs],
        "max_ratio_outside_fraction": outside,
        "max_clip_active_fraction": [float(run.diagnostics["clip_active_fraction"].max()) for run in runs],
        "max_kl_k3": kl,
        **ratio_statistics(outside, kl),
    }


def ratio_statistics(max_outside_fractions: list[float], max_kls: list[float]) -> dict[str, object]:
    """What the claim states of the seeds' runs: on how many seeds some ratio left the interval after the
    epochs, and the median over seeds of each run's largest k3 KL."""
    return {"seeds_with_ratios_outside": int(np.sum(np.asarray(max_outside_fractions) > 0)),
            "median_max_kl_k3": float(np.median(max_kls))}


# ------------------------------------------------------------------------ the bounds: a state on one has not failed yet


def _on_and_beyond(bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """States [x, ẋ, θ, θ̇] exactly on each bound (either sign), and one float beyond each.

    The θ bound in radians rounds one unit apart written as Gymnasium writes it (12 · 2π / 360)
    and as math.radians(12): the state on the bound takes the smaller, the one beyond the next
    float after the larger, so either way of writing it gives the same answers.
    """
    degrees = bounds.theta_threshold_degrees
    candidates = (bounds.theta_threshold, math.radians(degrees), degrees * math.pi / 180)
    theta_on, theta_beyond = min(candidates), math.nextafter(max(candidates), math.inf)
    x_on, x_beyond = bounds.x_threshold, math.nextafter(bounds.x_threshold, math.inf)
    on = [[sign * x_on, 0, 0, 0] for sign in (1, -1)] + [[0, 0, sign * theta_on, 0] for sign in (1, -1)]
    beyond = [[sign * x_beyond, 0, 0, 0] for sign in (1, -1)] + [[0, 0, sign * theta_beyond, 0] for sign in (1, -1)]
    return np.array(on, dtype=float), np.array(beyond, dtype=float)


@verifier(kind="exact", uses=("cartpole_terminated",), params=Bounds)
def bounds_are_strict(ctx: Context) -> dict[str, object]:
    """impl's ``cartpole_terminated`` on the four states exactly on the x and θ bounds, and on the four
    one float beyond them (see :func:`_on_and_beyond`)."""
    on, beyond = _on_and_beyond(ctx.params)
    return {"on_bounds_terminated": [bool(t) for t in np.asarray(ctx.impl.cartpole_terminated(on))],
            "beyond_bounds_terminated": [bool(t) for t in np.asarray(ctx.impl.cartpole_terminated(beyond))]}
