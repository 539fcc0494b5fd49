"""PyTorch implementations: a correct loss module passes every check of its functions by autograd, each PyTorch
zoo variant fails the claims named for it, and a malformed loss is an error row naming the function.

Skipped without PyTorch (the optional extra ``.[torch]``); ``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import checks_using, course_catalogue, outcomes_against

from claims_harness._running.implementation import _cause
from zoo.pytorch import TORCH_VARIANTS

SYLLABUS = ("reinforce_loss", "surrogate_loss", "ppo_clip_loss", "clip_diagnostics", "mean_baseline", "rloo_baseline",
            "value_iteration")


def _checks_against(impl: str, functions: tuple[str, ...]) -> dict[str, dict]:
    """Node id -> evidence of every check that calls one of ``functions``, run against ``impl`` (smoke profile)."""
    return {node: outcome.evidence["check"]
            for node, outcome in outcomes_against(impl, checks_using(functions)).items()}


def test_without_pytorch_an_implementation_in_it_is_told_what_to_install():
    error = ModuleNotFoundError("No module named 'torch'", name="torch")
    assert "pip install -e '.[torch]'" in _cause("student_rl", error)


torch = pytest.importorskip("torch")


def test_the_pytorch_loss_module_is_judged_on_every_check_of_its_functions_and_passes():
    """Its checks that hand value_iteration fractions run their float twins: none is left not judged."""
    checks = list(_checks_against("examples.torch_rl", SYLLABUS).values())
    assert [check for check in checks if check["status"] in ("failed", "error")] == []
    assert sum(check["status"] == "passed" for check in checks) >= 12
    assert [check for check in checks if check["not_judged"]] == []
    assert sum(check["in_floats"] == "twin" for check in checks) >= 4, checks


def test_each_pytorch_variant_fails_the_claims_named_for_it_naming_the_function():
    """Each variant replaces one function of the correct module: the checks of that function are run against it
    (those of the others are the correct module's, judged above), and exactly the variant's claims fail."""
    def replaced(name: str) -> str:
        module = __import__(f"zoo.pytorch.{name}", fromlist=["_"])
        (function,) = [function for function in SYLLABUS
                       if getattr(getattr(module, function), "__module__", None) == module.__name__]
        return function

    def failed(name: str) -> dict[str, str]:
        checks = _checks_against(f"zoo.pytorch.{name}", (replaced(name),))
        return {node.split("::")[1]: json.dumps(check) for node, check in checks.items()
                if check["status"] in ("failed", "error")}

    found = {name: failed(name) for name in TORCH_VARIANTS}
    for name, variant in TORCH_VARIANTS.items():
        assert set(found[name]) == set(variant.caught_by), (name, sorted(found[name]))
        assert all(replaced(name) in text for text in found[name].values()), (name, replaced(name))


MALFORMED = {
    "float32": "return (-(adv.detach() * logp).mean()).float()",
    "not a tensor": "return float(-(adv.detach() * logp).mean())",
    "per token": "return -(adv.detach() * logp)",
    "detached": "return (-(adv.detach() * logp).mean()).detach()",
}


@pytest.mark.parametrize("fault", list(MALFORMED))
def test_a_malformed_pytorch_loss_is_an_error_row_naming_the_function(pytester, fault):
    pytester.makepyfile(bad_loss=f"""
import torch
from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__  # noqa: F401
__claims_reference_fallback__ = True


def reinforce_loss(logp, adv, mask=None):
    adv = adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)
    {MALFORMED[fault]}
""")
    from claims_harness import RunOptions, run_check

    catalogue = course_catalogue()
    entry = next(entry for entry in catalogue.entries if entry.id == "reinforce-step-is-reward-scaled-sft-step")
    index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == "losses.reinforce_loss_property")
    sys.path.insert(0, str(pytester.path))
    try:
        result = run_check(entry, index, catalogue.verifiers[entry.claim.checks[index].verifier],
                           RunOptions(impl="bad_loss", isolation=False, cache_dir=None))
    finally:
        sys.path.remove(str(pytester.path))
        sys.modules.pop("bad_loss", None)
    assert result.status in ("failed", "error"), result
    text = f"{result.error} {json.dumps(result.observed)}"
    assert "reinforce_loss" in text, text


def test_exercises_write_the_named_modules_in_pytorch_and_refuse_an_unknown_one(tmp_path):
    import importlib

    from claims_harness.engine import library_of, write_exercises
    from claims_harness.errors import ClaimsError

    catalogue = course_catalogue()
    with pytest.raises(ClaimsError, match="--torch nowhere: no such module"):
        write_exercises(tmp_path / "bad_exercises", catalogue, torch=("nowhere",))
    write_exercises(tmp_path / "torch_exercises", catalogue, torch=("losses",))
    sys.path.insert(0, str(tmp_path))
    try:
        assert library_of(importlib.import_module("torch_exercises.losses").reinforce_loss) == "torch"
        assert library_of(importlib.import_module("torch_exercises.gae").gae_advantages) == "numpy"
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.startswith("torch_exercises")]:
            del sys.modules[name]


def _one_check(directory: Path, impl: str, claim_id: str, verifier: str):
    """The result of ``claim_id``'s check by ``verifier`` against the module ``impl`` written in ``directory``."""
    from claims_harness import RunOptions, run_check

    catalogue = course_catalogue()
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
    index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier)
    sys.path.insert(0, str(directory))
    try:
        return run_check(entry, index, catalogue.verifiers[verifier],
                         RunOptions(impl=impl, cache_dir=None, directory=str(directory)))
    finally:
        sys.path.remove(str(directory))


# A wrong TD error (no discount) in NumPy, from a module that says it is PyTorch's: the declaration must not take it
# out of the exact checks, which it can compute.
NUMPY_SAYING_TORCH = """
import numpy as np
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True
__claims_array_library__ = "torch"


def td_errors(r_t, v_t, v_tp1, terminated_t, gamma):
    r_t, v_t, v_tp1, terminated_t = map(np.asarray, (r_t, v_t, v_tp1, terminated_t))
    return r_t + (1 - terminated_t) * v_tp1 - v_t
"""

# The same mistake in PyTorch: it cannot take Fractions, so the exact check judges it by replay, in float64.
TORCH = """
import torch
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True


def td_errors(r_t, v_t, v_tp1, terminated_t, gamma):
    r_t, v_t, v_tp1, terminated_t = (torch.as_tensor(x, dtype=torch.float64) for x in (r_t, v_t, v_tp1, terminated_t))
    return r_t + (1 - terminated_t) * v_tp1 - v_t
"""


@pytest.mark.parametrize(("source", "in_floats"), [(NUMPY_SAYING_TORCH, ""), (TORCH, "replay")])
def test_what_a_function_returns_decides_its_library_not_what_its_module_declares(tmp_path, source, in_floats):
    name = f"declares_{in_floats or 'numpy'}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    result = _one_check(tmp_path, name, "td-error-biased-with-approximate-critic", "actor_critic.td_error_bias_exact")
    assert (result.status, result.in_floats, result.blamed) == ("failed", in_floats, ["td_errors"]), result


# A PyTorch loss that leaves the advantage attached, from a module that says it is NumPy's: it answers tensors for
# tensors, so its gradient is autograd's and the leak is seen.
TORCH_SAYING_NUMPY = """
import torch
from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _masked_mean, _per_token  # noqa: F401

__claims_reference_fallback__ = True
__claims_array_library__ = "numpy"


def reinforce_loss(logp, adv, mask=None):
    logp, adv = torch.as_tensor(logp), torch.as_tensor(adv)
    return -_masked_mean(_per_token(adv, logp) * logp, None if mask is None else torch.as_tensor(mask))
"""


def test_a_pytorch_loss_that_says_it_is_numpys_still_has_its_gradient_taken_by_autograd(tmp_path):
    (tmp_path / "torch_saying_numpy.py").write_text(TORCH_SAYING_NUMPY, encoding="utf-8")
    result = _one_check(tmp_path, "torch_saying_numpy", "reinforce-step-is-reward-scaled-sft-step",
                        "losses.reinforce_loss_property")
    assert result.status == "failed", result
    assert "the gradient reaches adv" in result.observed["falsifying_example"]["assertion"], result.observed
