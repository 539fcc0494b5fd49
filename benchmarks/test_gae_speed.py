"""impl's GAE against the reference idioms, on a vectorized buffer and on one long trajectory.

Contenders, all with the same inputs and (where they support them) the same two masks:
- ``impl``: :func:`impl.gae_advantages`, both masks;
- ``python_loop``: the backward loop over time steps of CleanRL's and Stable-Baselines3's PPO,
  with numpy operations across environments (per element when there is one environment);
- ``python_loop_per_element``: the same loop written over every (step, environment) pair;
- ``lfilter``: TD errors then ``scipy.signal.lfilter`` discounting of the reversed array, the
  ``discount_cumsum`` of Spinning Up, which has no trace_cut mask and so is not GAE on these
  buffers; it is the speed of light for a first-order recursion in numpy/scipy.

Episodes end by termination with probability 1/200 per step (or 1/18: early CartPole, where a
cut comes every 18 steps on average; or 1/2, a cut every other step), or by truncation at a time
limit of 1000 steps, starting at random points of their first episode, so the buffers hold many
fragments of very different lengths. The ratios are printed by ``benchmarks/conftest.py``.

impl's GAE is the backward recursion of step 4.3.3 vectorised across environments (issue 31 retired
the target of staying within 2x of ``lfilter`` at every cut density: at the course's buffer sizes GAE
is a negligible share of any experiment, docs/performance.md). These timings say what that costs:
nothing on vectorised buffers, about 24x ``lfilter`` on one trajectory of 100,000 steps.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

import impl

GAMMA, LAMBDA = 0.99, 0.95
CASES = {f"T={length}, n_envs={n_envs}, episodes of ~{episode} steps": (length, n_envs, episode)
         for length, n_envs in ((2048, 64), (100000, 1)) for episode in (200, 18, 2)}


def _buffer(length: int, n_envs: int, episode: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    shape = (length, n_envs)
    r_t, v_t, v_tp1 = (rng.normal(size=shape) for _ in range(3))
    terminated_t = rng.random(shape) < 1 / episode
    elapsed = rng.integers(0, 1000, size=n_envs)
    truncated_t = np.zeros(shape, dtype=bool)
    for t in range(length):
        elapsed += 1
        truncated_t[t] = (elapsed >= 1000) & ~terminated_t[t]
        elapsed[terminated_t[t] | truncated_t[t]] = 0
    trace_cut_t = terminated_t | truncated_t
    arrays = (r_t, v_t, v_tp1, terminated_t.astype(float), trace_cut_t.astype(float))
    return tuple(a[:, 0].copy() for a in arrays) if n_envs == 1 else arrays


def python_loop(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    advantages = np.zeros_like(r_t)
    last = 0.0
    for t in reversed(range(len(r_t))):
        delta = r_t[t] + gamma * (1.0 - terminated_t[t]) * v_tp1[t] - v_t[t]
        last = delta + gamma * lambda_ * (1.0 - trace_cut_t[t]) * last
        advantages[t] = last
    return advantages


def python_loop_per_element(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    advantages = np.zeros_like(r_t)
    for env in range(r_t.shape[1]):
        last = 0.0
        for t in reversed(range(len(r_t))):
            delta = r_t[t, env] + gamma * (1.0 - terminated_t[t, env]) * v_tp1[t, env] - v_t[t, env]
            last = delta + gamma * lambda_ * (1.0 - trace_cut_t[t, env]) * last
            advantages[t, env] = last
    return advantages


def lfilter_discounting(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    delta = r_t + gamma * (1.0 - terminated_t) * v_tp1 - v_t
    return lfilter([1.0], [1.0, -gamma * lambda_], delta[::-1], axis=0)[::-1]


CONTENDERS = {"impl": impl.gae_advantages, "python_loop": python_loop,
              "python_loop_per_element": python_loop_per_element, "lfilter": lfilter_discounting}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return request.param, _buffer(*CASES[request.param])


@pytest.mark.parametrize("contender", list(CONTENDERS))
def test_gae_speed(benchmark, record_median, case, contender):
    name, arrays = case
    if contender == "python_loop_per_element" and arrays[0].ndim == 1:
        pytest.skip("with one environment the per-step loop already runs per element")
    benchmark.group = name
    slow = contender.startswith("python_loop")
    run = CONTENDERS[contender]
    if slow:
        result = benchmark.pedantic(run, args=(*arrays, GAMMA, LAMBDA), rounds=5, iterations=1)
    else:
        result = benchmark(run, *arrays, GAMMA, LAMBDA)
    record_median(name, contender, benchmark)
    if contender == "impl":  # the same recursion in the same order: the same floats
        np.testing.assert_array_equal(result, python_loop(*arrays, GAMMA, LAMBDA))
