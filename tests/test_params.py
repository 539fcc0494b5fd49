"""What the verifiers' parameter models share (``verifiers._params``): a claim's lists that must give one entry each
per the same thing are refused, naming every list, when their lengths differ."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from verifiers.baseline_optimal import ExactSoftmaxState
from verifiers.score_function import CheckedAnswers, SampledCategorical


def test_two_lists_of_different_lengths_are_refused_naming_both():
    with pytest.raises(ValidationError, match="pi and q need one entry per action"):
        ExactSoftmaxState(pi=["1/2", "1/2"], q=["1", "2", "3"])


@pytest.mark.parametrize("odd_one", ["probabilities", "values", "sampling"])
def test_three_lists_are_refused_when_any_one_differs_naming_all_three(odd_one):
    params = {"probabilities": [0.5, 0.5], "values": [1.0, 2.0], "sampling": [0.25, 0.75], "max_samples": 2}
    params[odd_one] = [0.2, 0.3, 0.5]
    with pytest.raises(ValidationError, match="probabilities, values and sampling need one entry per outcome"):
        SampledCategorical(**params)


def test_lists_of_one_length_are_accepted():
    assert SampledCategorical(probabilities=[0.5, 0.5], values=[1, 2], sampling=[0.25, 0.75], max_samples=2).values \
        == [1.0, 2.0]
    answers = CheckedAnswers(probabilities=[0.25, 0.75], true_rewards=[1, 0], checker_rewards=[1, 1])
    assert answers.checker_rewards == [1.0, 1.0]
    refused = "probabilities, true_rewards and checker_rewards need one entry per answer"
    with pytest.raises(ValidationError, match=refused):
        CheckedAnswers(probabilities=[0.25, 0.75], true_rewards=[1, 0], checker_rewards=[1, 1, 0])
