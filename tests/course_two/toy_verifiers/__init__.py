"""The toy course's verifiers: registered by name, handed the implementation under test."""

from fractions import Fraction

from claims_harness import Context, NoParams, check_property, reach, verifier
from claims_harness import strategies as st


class Terms(NoParams):
    """How many of the first positive integers to sum."""

    n: int


@verifier("toy.triangular_numbers", kind="exact", uses=("running_sum",), params=Terms)
def triangular_numbers(ctx: Context) -> dict[str, object]:
    """The running sums of 1..n computed by the implementation, and the last one against n(n+1)/2; their figure."""
    from matplotlib.figure import Figure

    n = ctx.params.n
    sums = ctx.impl.running_sum(list(range(1, n + 1)))
    reach(terms=len(sums))
    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot(range(1, n + 1), sums)
    return {"last": Fraction(sums[-1]), "closed_form_gap": Fraction(sums[-1]) - Fraction(n * (n + 1), 2),
            "figure": ctx.save_figure(figure, "running-sums")}


@verifier("toy.closed_form_property", kind="property", uses=("running_sum",))
def closed_form_property(ctx: Context) -> dict[str, object]:
    """The implementation's last running sum of 1..n against n(n+1)/2, for n from 1 to 200."""

    def last_sum_is_closed_form(n: int) -> None:
        reach(terms=n)
        assert ctx.impl.running_sum(list(range(1, n + 1)))[-1] == n * (n + 1) // 2, f"n = {n}"

    return check_property(ctx, last_sum_is_closed_form, st.integers(1, 200))
