"""The stop-gradient claims of lesson 4.3 against two wrong actor-critic iterations (tests/fixtures).

``actor_advantages_after_critic_step`` recomputes the actor's advantages from the critic after
its step; ``normalised_critic_targets`` fits the critic to targets built from normalised
advantages. In NumPy both are as easy to write as the right loop, and neither breaks a
stop-gradient anyone could see: each must turn exactly its own check of
``actor-treats-advantages-as-constants`` red, while the reference passes all three.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from conftest import course_entry

import impl
from claims_harness import RunOptions, lookup, run_check

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STOP_GRADIENT = "actor-treats-advantages-as-constants"
WRONG_ITERATIONS = ("actor_advantages_after_critic_step", "normalised_critic_targets")


def _run_claim(claim_id: str, implementation: str) -> list[str]:
    entry = course_entry(claim_id)
    return [run_check(entry, i, lookup(check.verifier), RunOptions(impl=implementation)).status
            for i, check in enumerate(entry.claim.checks)]


def _verifiers(claim_id: str) -> list[str]:
    entry = course_entry(claim_id)
    return [check.verifier for check in entry.claim.checks]


@pytest.fixture
def fixtures_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    yield
    for name in WRONG_ITERATIONS:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("name", WRONG_ITERATIONS)
def test_each_wrong_iteration_is_the_reference_but_for_the_iteration(fixtures_on_path, name):
    module = importlib.import_module(name)
    assert module.__all__ == impl.__all__
    assert module.actor_critic_iteration is not impl.actor_critic_iteration
    for other in impl.__all__:
        if other != "actor_critic_iteration":
            assert getattr(module, other) is getattr(impl, other), other


def test_the_checks_are_the_actor_step_the_critic_step_and_the_witness():
    assert _verifiers(STOP_GRADIENT) == ["actor_critic.actor_step_property", "actor_critic.critic_step_property",
                                         "actor_critic.actor_loss_depends_on_critic"]


def test_the_reference_passes_every_stop_gradient_check():
    assert _run_claim(STOP_GRADIENT, "impl") == ["passed", "passed", "passed"]


def test_advantages_recomputed_after_the_critic_step_fail_the_actor_check(fixtures_on_path):
    assert _run_claim(STOP_GRADIENT, "actor_advantages_after_critic_step") == ["failed", "passed", "passed"]


def test_critic_targets_from_normalised_advantages_fail_the_critic_check(fixtures_on_path):
    assert _run_claim(STOP_GRADIENT, "normalised_critic_targets") == ["passed", "failed", "passed"]
    # The exact comparison of the critic's step with and without normalisation catches it too.
    assert _run_claim("value-targets-ignore-normalisation", "normalised_critic_targets") == ["passed", "failed"]
