"""The actor-critic MLP's backpropagation, Adam and gradient clipping."""

from __future__ import annotations

import numpy as np
import pytest

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


def test_backpropagation_matches_central_differences(rng):
    params = impl.actor_critic_init(rng, 4, 3, (5, 6))
    params = {name: value + rng.normal(scale=0.3, size=value.shape) for name, value in params.items()}
    obs = rng.normal(size=(7, 4))
    d_logits, d_values = rng.normal(size=(7, 3)), rng.normal(size=7)

    def loss(p):
        output = impl.actor_critic_forward(p, obs)
        return float((output.logits * d_logits).sum() + (output.values * d_values).sum())

    grads = impl.actor_critic_backward(params, impl.actor_critic_forward(params, obs), d_logits, d_values)
    assert grads.keys() == params.keys()
    step = 1e-6
    for name, value in params.items():
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            up, down = dict(params), dict(params)
            up[name], down[name] = value.copy(), value.copy()
            up[name][index] += step
            down[name][index] -= step
            numeric[index] = (loss(up) - loss(down)) / (2 * step)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=name)


def test_policy_logits_are_the_forward_pass_logits(rng):
    params = impl.actor_critic_init(rng, 4, 2)
    obs = rng.normal(size=(9, 4))
    np.testing.assert_array_equal(impl.policy_logits(params, obs), impl.actor_critic_forward(params, obs).logits)


def test_orthogonal_initialisation_and_gains(rng):
    params = impl.actor_critic_init(rng, 4, 2, (64, 64))
    w1 = params["policy.w1"]
    np.testing.assert_allclose(w1.T @ w1, 2.0 * np.eye(64), atol=1e-12)
    assert np.abs(params["policy.w2"]).max() < 0.02
    assert all(not params[name].any() for name in params if ".b" in name)


def test_adam_first_step_moves_each_parameter_by_the_learning_rate():
    params = {"w": np.array([1.0, -2.0, 3.0])}
    grads = {"w": np.array([0.5, -4.0, 1e-3])}
    updated, state = impl.adam_update(params, grads, impl.adam_init(params), learning_rate=0.1, eps=0.0)
    np.testing.assert_allclose(updated["w"], params["w"] - 0.1 * np.sign(grads["w"]), rtol=1e-12)
    assert state.step == 1
    assert params["w"][0] == 1.0  # inputs are not modified


def test_adam_minimises_a_quadratic():
    params = {"x": np.array([3.0, -1.0])}
    state = impl.adam_init(params)
    for _ in range(2000):
        params, state = impl.adam_update(params, {"x": 2 * params["x"]}, state, learning_rate=0.01)
    np.testing.assert_allclose(params["x"], 0, atol=1e-3)


def test_clip_by_global_norm():
    grads = {"a": np.array([3.0]), "b": np.array([[4.0]])}
    clipped, norm = impl.clip_by_global_norm(grads, 1.0)
    assert norm == 5.0
    assert impl.global_norm(clipped) == pytest.approx(1.0)
    np.testing.assert_allclose(clipped["a"] / clipped["b"][0], 3.0 / 4.0)
    same, _ = impl.clip_by_global_norm(grads, 10.0)
    assert same is grads
