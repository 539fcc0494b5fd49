"""The toy course's verifiers: registered by name, handed the implementation under test."""

from fractions import Fraction

from hypothesis import strategies as st

from harness import Context, check_property, reach, verifier


@verifier("toy.triangular_numbers", kind="exact", uses=("running_sum",))
def triangular_numbers(ctx: Context) -> dict[str, object]:
    """The running sums of 1..10 computed by the implementation, and the last one against n(n+1)/2; their figure."""
    from matplotlib.figure import Figure

    sums = ctx.impl.running_sum(list(range(1, 11)))
    reach(terms=len(sums))
    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot(range(1, 11), sums)
    return {"last": Fraction(sums[-1]), "closed_form_gap": Fraction(sums[-1]) - Fraction(10 * 11, 2),
            "figure": ctx.save_figure(figure, "running-sums")}


@verifier("toy.closed_form_property", kind="property", uses=("running_sum",))
def closed_form_property(ctx: Context) -> dict[str, object]:
    """The implementation's last running sum of 1..n against n(n+1)/2, for n from 1 to 200."""

    def last_sum_is_closed_form(n: int) -> None:
        reach(terms=n)
        assert ctx.impl.running_sum(list(range(1, n + 1)))[-1] == n * (n + 1) // 2, f"n = {n}"

    return check_property(ctx, last_sum_is_closed_form, st.integers(1, 200))
