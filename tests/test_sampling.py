"""The verifiers' bulk samplers draw exactly what numpy's own samplers draw from the same generator state."""

from __future__ import annotations

import numpy as np
import pytest

from verifiers._sampling import bernoulli, categorical


@pytest.mark.parametrize("p", [[0.5, 0.3, 0.2], [1 / 3] * 3, [0.1, 0.0, 0.9], [0.25] * 4, [1.0],
                               list(np.full(300, 1 / 300))])  # beyond 255 categories: choice itself
@pytest.mark.parametrize("size", [100_003, (1000, 7)])
def test_categorical_draws_are_choices_draws(p, size):
    expected = np.random.default_rng(7).choice(len(p), size=size, p=p)
    drawn = categorical(np.random.default_rng(7), p, size)
    assert drawn.dtype == expected.dtype and drawn.shape == expected.shape
    np.testing.assert_array_equal(drawn, expected)


@pytest.mark.parametrize("p", [[0.5, 0.6], [-0.1, 1.1], [np.nan, 1.0]])
def test_categorical_refuses_what_choice_refuses(p):
    with pytest.raises(ValueError, match="probabilities"):
        categorical(np.random.default_rng(0), p, 10)


def test_bernoulli_is_one_below_p():
    uniform = np.random.default_rng(3).random((500, 8))
    np.testing.assert_array_equal(bernoulli(np.random.default_rng(3), 0.35, (500, 8)), (uniform < 0.35).astype(float))
