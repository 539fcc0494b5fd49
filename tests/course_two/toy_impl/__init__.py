"""The toy course's reference implementation."""

__all__ = ["running_sum"]


def running_sum(values):
    """The sums of the first 1, 2, ..., n values."""
    total, sums = 0, []
    for value in values:
        total += value
        sums.append(total)
    return sums
