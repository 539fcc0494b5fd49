"""The toy course's verifiers: registered by name, handed the implementation under test."""

from fractions import Fraction

from harness import Context, verifier


@verifier("toy.triangular_numbers", kind="exact", uses=("running_sum",))
def triangular_numbers(ctx: Context) -> dict[str, object]:
    """The running sums of 1..10 computed by the implementation, and the last one against n(n+1)/2; their figure."""
    from matplotlib.figure import Figure

    sums = ctx.impl.running_sum(list(range(1, 11)))
    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot(range(1, 11), sums)
    return {"last": Fraction(sums[-1]), "closed_form_gap": Fraction(sums[-1]) - Fraction(10 * 11, 2),
            "figure": ctx.save_figure(figure, "running-sums")}
