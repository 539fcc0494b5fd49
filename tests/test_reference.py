"""The module's reference experiment, ``python -m impl.reference``: its table, its figure, its determinism."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from impl import reference

GROUPS = "3000"


def _run(out: Path, seed: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert reference.main(["--groups", GROUPS, "--seed", seed, "--out", str(out)]) == 0
    return capsys.readouterr().out


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for label in reference.LABELS.values():
        line = next(line for line in table.splitlines() if line.startswith(label))
        rows[label] = line[len(label):].replace("[", " ").replace("]", " ").replace(",", " ").split()
    return rows


def test_table_reports_each_estimator_with_interval_and_exact_expectation(tmp_path, capsys):
    out = _run(tmp_path, "3", capsys)
    moments = reference.exact_moments(reference.BernoulliGroups())
    rows = _rows(out)
    assert "groups, seed 3" in out
    for name, label in reference.LABELS.items():
        mean, low, high, variance, exact_mean, exact_variance = map(float, rows[label])
        assert low < mean < high
        assert variance > 0
        assert exact_mean == pytest.approx(float(moments[name][0]), rel=1e-6)
        assert exact_variance == pytest.approx(float(moments[name][1]), rel=1e-6)


def test_figure_is_an_svg_identical_for_the_same_seed(tmp_path, capsys):
    first, second, other = (tmp_path / name for name in ("first", "second", "other"))
    _run(first, "5", capsys)
    _run(second, "5", capsys)
    _run(other, "6", capsys)
    figure = (first / reference.FIGURE_NAME).read_bytes()
    assert figure.startswith(b"<?xml") and b"<svg" in figure
    assert figure == (second / reference.FIGURE_NAME).read_bytes()
    assert figure != (other / reference.FIGURE_NAME).read_bytes()


def test_exact_moments_match_the_closed_forms():
    for setting in (reference.BernoulliGroups(),
                    reference.BernoulliGroups(Fraction(1, 10), Fraction(2), Fraction(1, 2), 5)):
        moments = reference.exact_moments(setting)
        gradient = setting.p * (1 - setting.p) * (setting.reward_success - setting.reward_failure)
        shrink = Fraction(setting.group_size - 1, setting.group_size)
        assert moments["no_baseline"][0] == gradient
        assert moments["leave_one_out"][0] == gradient
        assert moments["group_mean"][0] == shrink * gradient
        assert moments["group_mean"][1] == shrink**2 * moments["leave_one_out"][1]


def test_sampled_estimates_stay_inside_their_bounds():
    setting = reference.BernoulliGroups()
    actions = (np.random.default_rng(0).random((2000, setting.group_size)) < float(setting.p)).astype(float)
    bounds = reference.estimate_bounds(setting)
    for name, values in reference.group_estimates(actions, setting).items():
        assert np.all(np.abs(values) <= bounds[name])


def test_runs_as_a_module(tmp_path):
    result = subprocess.run([sys.executable, "-m", "impl.reference", "--groups", "200", "--out", str(tmp_path)],
                            capture_output=True, text=True, check=True)
    assert "leave-one-out" in result.stdout
    assert (tmp_path / reference.FIGURE_NAME).is_file()
