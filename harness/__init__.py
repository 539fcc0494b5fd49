"""The claim-verification engine: every checkable statement of a course text, checked against an implementation.

Which course, and where its claims, sources and reference implementation are, is the project's
``[tool.claims]`` table in pyproject.toml (``harness._course``).

Verifiers use :func:`verifier` to register, receive a :class:`Context`, and return a mapping
of observed values; the harness compares those with what the claim file expects.
"""

from harness import stats
from harness._context import Context, ImplementationView
from harness._errors import ClaimsError, ImplementationError, Problem, RegistryError, VerifierError
from harness._executor import SeedRun
from harness._property import assume, check_property
from harness._registry import NoParams, verifier
from harness.stats import MeanEstimate

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
