"""What the verifiers' parameter models share: the probability distributions a claim file writes, and lists that
give one entry each per the same thing (:func:`one_entry_each`).

A claim writes a probability as a decimal (a float that stands for the rational it spells, 0.35 for 7/20) or
as a fraction string such as '1/3'; either is read exactly (:func:`verifiers._exact.as_fraction`), so a
distribution sums to exactly one, not to one up to rounding. A field of one of these types is validated as a
field, and a violation is reported at its place in the parameters (``P.0.1``, ``prefix_probabilities.ab``).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from pydantic import AfterValidator, model_validator

from verifiers._exact import as_fraction


def _summing_to_one(row: list, *, positive: bool) -> list:
    exact = [as_fraction(p) for p in row]
    if sum(exact) != 1 or any(p <= 0 if positive else p < 0 for p in exact):
        raise ValueError(f"must be {'positive' if positive else 'non-negative'} and sum to exactly one, got {row}")
    return row


# Non-negative decimals summing to one: rows P[s][a], a start distribution, a policy that may leave out actions.
Distribution = Annotated[list[float], AfterValidator(functools.partial(_summing_to_one, positive=False))]
# Positive decimals summing to one: a softmax policy, whose logits log π must be finite.
PositiveDistribution = Annotated[list[float], AfterValidator(functools.partial(_summing_to_one, positive=True))]
# Positive fraction strings ('1/3') summing to one: a softmax policy whose probabilities no decimal writes.
PositiveFractions = Annotated[list[str], AfterValidator(functools.partial(_summing_to_one, positive=True))]


def one_entry_each(*fields: str, per: str) -> Any:
    """A model validator: the list ``fields`` have as many entries each, one per ``per``.

    Assign it in the model's body (``_lengths = one_entry_each("pi", "q", per="action")``)."""
    names = f"{', '.join(fields[:-1])} and {fields[-1]}"

    def check(model: Any) -> Any:
        if len({len(getattr(model, field)) for field in fields}) > 1:
            raise ValueError(f"{names} need one entry per {per}")
        return model
    return model_validator(mode="after")(check)
