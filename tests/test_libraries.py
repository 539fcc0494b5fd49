"""Real library code judged by the claims: Stable-Baselines3's buffers (examples/sb3_rl.py) and rlax's estimators and
losses (examples/rlax_rl.py), each through ``claims verify`` in the smoke profile, on the claims of the functions the
adapter provides.

Nothing may fail. What a library cannot express is a status that says so, never a failure:

- a check that passes Fractions is judged by replay, each of its calls made again in float64 and held to the
  reference's exact answer within its rounding bound (both adapters declare ``__claims_exact_arithmetic__ = False``:
  neither library has an object dtype); one whose calls cannot all be made again is not judged, as needing exact
  arithmetic;
- a check that needs ``gae_advantages(carry=)`` throughout is skipped as an unsupported call, and the rows of the
  4.3.4 table that need it are listed as not checked (neither library carries an advantage into a buffer);
- a result in float32 (SB3's ``RolloutBuffer`` stores and computes in it) is an error naming the dtype.

So that float32 cannot hide a mapping error, the SB3 adapter is also run with its buffer switched to float64 (a probe
written for the test), where every check of its GAE and returns must pass.

Skipped without the libraries (``tox -e libraries`` installs them).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOAT32_ERROR = "returned float32 for float64 arguments: the harness judges in float64"
SKIP_REASONS = ("needs exact arithmetic", "unsupported call:", "runs only in the full profile")
TIME_LIMIT = "ran past its time limit"
FLOAT64_PROBE = '''
import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer

import examples.sb3_rl as adapter
from examples.sb3_rl import *  # noqa: F403
from examples.sb3_rl import __all__  # noqa: F401

__claims_reference_fallback__ = True
__claims_array_library__ = "numpy"


class Float64RolloutBuffer(RolloutBuffer):
    def reset(self):
        super().reset()
        for name in ("rewards", "returns", "episode_starts", "values", "log_probs", "advantages"):
            setattr(self, name, getattr(self, name).astype(np.float64))


adapter.RolloutBuffer = Float64RolloutBuffer
'''


def _provided(module_name: str) -> list[str]:
    """The contract functions the adapter defines itself (the rest are impl's, taken as given)."""
    import impl

    module = importlib.import_module(module_name)
    return sorted(name for name in impl.__all__ if inspect.isfunction(getattr(module, name, None))
                  and getattr(module, name).__module__ == module_name)


def _checks(impl: str, functions: list[str], pythonpath: str | None = None) -> list[tuple[str, dict]]:
    """(claim id, check) for every check of a smoke run of ``claims verify`` against ``impl`` on ``functions``."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (pythonpath, env.get("PYTHONPATH"))))
    with tempfile.TemporaryDirectory(prefix="claims-libraries-") as report:
        command = [sys.executable, "-m", "claims_harness.cli", "verify", "--claims-impl", impl, "--claims-report",
                   report, "--claims-profile", "smoke", "--no-cache", "-n", "1", "-k", " or ".join(functions)]
        finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        results = Path(report) / "claims.json"
        assert results.is_file(), finished.stdout[-3000:] + finished.stderr[-3000:]
        rows = json.loads(results.read_text(encoding="utf-8"))["claims"]
    return [(row["id"], check) for row in rows for check in row["checks"]]


def _judge(checks: list[tuple[str, dict]], errors: tuple[str, ...] = (), diverges: tuple[str, ...] = ()
           ) -> dict[str, int]:
    """Assert that no check failed but those of the claims ``diverges`` (each of which must fail: a library's known
    divergence from the contract, to be noticed when it goes), that every error names one of ``errors`` and every
    skip says why; return how many checks had each status, and each skip reason's first words."""
    statuses: dict[str, int] = {}
    diverged = {claim for claim, check in checks if check["status"] == "failed"}
    assert diverged == set(diverges), (diverged, diverges)
    for claim, check in checks:
        if claim in diverges:
            continue
        where = f"{claim} ({check['kind']}, {check['verifier']})"
        # A training run past its smoke time limit on a busy machine says nothing of the library: counted apart.
        timed_out = check["status"] == "error" and check["kind"] == "experiment" and TIME_LIMIT in check["error"]
        status = TIME_LIMIT if timed_out else check["status"]
        statuses[status] = statuses.get(status, 0) + 1
        assert check["status"] != "failed", f"{where} fails: {json.dumps(check['comparisons'])[:2000]}"
        if check["in_floats"] == "replay" and check["status"] == "passed":
            statuses["replayed"] = statuses.get("replayed", 0) + 1
        if status == "error":
            assert any(reason in (check["error"] or "") for reason in errors), f"{where}: {check['error']}"
        if check["status"] in ("skipped", "not judged"):  # not judged: declined (exact arithmetic, carry=)
            reason = check["skip_reason"] or ""
            assert reason.startswith(SKIP_REASONS), f"{where}: {reason}"
            statuses[reason.split(":")[0]] = statuses.get(reason.split(":")[0], 0) + 1
    return statuses


def test_stable_baselines3_fails_nothing_and_names_its_float32():
    pytest.importorskip("stable_baselines3")
    functions = _provided("examples.sb3_rl")
    assert {"gae_advantages", "n_step_advantages", "discounted_returns", "explained_variance"} <= set(functions)
    checks = _checks("examples.sb3_rl", functions)
    statuses = _judge(checks, errors=(FLOAT32_ERROR,))
    assert statuses.get("passed", 0) >= 30 and statuses.get("error", 0) >= 10, statuses


def test_stable_baselines3_with_a_float64_buffer_fails_nothing(tmp_path):
    pytest.importorskip("stable_baselines3")
    (tmp_path / "sb3_float64_probe.py").write_text(FLOAT64_PROBE, encoding="utf-8")
    checks = _checks("sb3_float64_probe", ["gae_advantages", "discounted_returns", "full_return_weights"],
                     pythonpath=str(tmp_path))
    # The probe's functions compute in float64; the adapter's n_step_advantages, which some of their checks use too
    # (judged by replay), is still SB3's float32.
    statuses = _judge(checks, errors=(f"examples.sb3_rl.n_step_advantages {FLOAT32_ERROR}",))
    assert statuses.get("passed", 0) >= 20, statuses


def test_rlax_passes_every_check_it_can_express_but_its_gradient_on_the_clip_boundary():
    pytest.importorskip("rlax")
    pytest.importorskip("jax")
    functions = _provided("examples.rlax_rl")
    assert {"gae_advantages", "n_step_advantages", "td_errors", "ppo_clip_objective", "ppo_clip_loss"} <= set(functions)
    checks = _checks("examples.rlax_rl", functions)
    # JAX's gradient of the clipped objective at a ratio exactly on the clip's boundary, where min's two branches
    # tie, averages their gradients (r A / 2); the contract's, and the objective's own on both sides, is r A.
    # Replay shows it on the boundary examples the property draws (a measure-zero point, but a wrong number).
    statuses = _judge(checks, diverges=("clipped-objective-definition",))
    assert statuses.get("passed", 0) >= 55 and "error" not in statuses, statuses
    assert statuses.get("replayed", 0) >= 20 and statuses.get("unsupported call", 0) >= 1, statuses
