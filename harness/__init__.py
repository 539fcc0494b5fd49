"""The claim-verification engine: every checkable statement of a course text, checked against an implementation.

Which course, and where its claims, sources and reference implementation are, is the project's
``[tool.claims]`` table in pyproject.toml (``harness._claims.course``).

Verifiers use :func:`verifier` to register, receive a :class:`Context`, and return a mapping
of observed values; the harness compares those with what the claim file expects.
"""

from harness._running.rewriting import leave_libraries_unrewritten

leave_libraries_unrewritten()  # first: the imports below bring in Hypothesis

from harness import stats  # noqa: E402
from harness._claims.errors import ClaimsError, ImplementationError, Problem, RegistryError, VerifierError  # noqa: E402
from harness._claims.registry import NoParams, verifier  # noqa: E402
from harness._running.context import Context, ImplementationView  # noqa: E402
from harness._running.executor import SeedRun  # noqa: E402
from harness._running.property import assume, check_property  # noqa: E402
from harness.stats import MeanEstimate  # noqa: E402

__all__ = [
    "ClaimsError",
    "Context",
    "ImplementationError",
    "ImplementationView",
    "MeanEstimate",
    "NoParams",
    "Problem",
    "RegistryError",
    "SeedRun",
    "VerifierError",
    "assume",
    "check_property",
    "stats",
    "verifier",
]
