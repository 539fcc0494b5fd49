"""JAX implementations, by the route PyTorch's take: the example loss module passes its checks, a module computing
in JAX's default float32 is told to switch on 64-bit floats, and an exact check runs its float twin.

Skipped without JAX (``pip install jax``); ``tox -e libraries`` installs it.
"""

from __future__ import annotations

import pytest
from conftest import course_catalogue, course_entry

from claims_harness import RunOptions, run_check

pytest.importorskip("jax")

KEY_TEST = ("surrogate-gradient-equals-policy-gradient-at-old", "losses.key_test_property")
EXACT_VALUE_ITERATION = ("value-iteration-two-states", "tabular.value_iteration_two_states")


def _run(check: tuple[str, str], implementation: str):
    claim_id, verifier = check
    entry = course_entry(claim_id)
    (index,) = [i for i, c in enumerate(entry.claim.checks) if c.verifier == verifier]
    return run_check(entry, index, course_catalogue().verifiers[verifier], RunOptions(impl=implementation))


def test_the_jax_loss_module_passes_the_key_test_by_central_differences():
    result = _run(KEY_TEST, "examples.jax_rl")
    assert result.status == "passed", (result.status, result.error, result.observed)


def test_an_exact_check_of_jax_code_is_judged_by_its_float_twin():
    result = _run(EXACT_VALUE_ITERATION, "examples.jax_rl")
    assert (result.status, result.in_floats) == ("passed", "twin"), (result.status, result.error, result.skip_reason)


def test_jax_in_float32_is_told_to_switch_on_64_bit_floats(module):
    # Off explicitly: another module imported earlier in this process (examples.rlax_rl) may have switched it on.
    name = module("jax_float32_losses", '''\
import jax
import jax.numpy as jnp

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True
jax.config.update("jax_enable_x64", False)


def reinforce_loss(logp, adv, mask=None):
    return -jnp.mean(adv[..., None] * logp if adv.ndim < logp.ndim else adv * logp)
''')
    result = _run(("reinforce-step-is-reward-scaled-sft-step", "losses.reinforce_loss_property"), name)
    assert result.status == "error", (result.status, result.comparisons)
    assert "jax_float32_losses.reinforce_loss is written in JAX with 64-bit floats off" in result.error, result.error
    assert "jax.config.update('jax_enable_x64', True)" in result.error
