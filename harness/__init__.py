"""The claim-verification engine: every checkable statement of a course text, checked against an implementation.

Which course, and where its claims, sources and reference implementation are, is the project's
``[tool.claims]`` table in pyproject.toml (``harness._claims.course``).

Verifiers use :func:`verifier` to register, receive a :class:`Context`, and return a mapping
of observed values; the harness compares those with what the claim file expects. They call
:func:`reach` with the values each witness or drawn example used (the discount, the number of
actions, ...), which the report compares with the scope each statement speaks for. A program (a
notebook, a test) loads the claims with :func:`load_catalogue` and runs one check with
:func:`run_check`, configured by :class:`RunOptions`.
"""

from harness._running.rewriting import leave_libraries_unrewritten

leave_libraries_unrewritten()  # first: the imports below bring in Hypothesis

from harness import stats  # noqa: E402
from harness._claims.errors import (  # noqa: E402
    ClaimsError,
    ImplementationError,
    Problem,
    RegistryError,
    Unsupported,
    VerifierError,
)
from harness._claims.expect import Declined  # noqa: E402
from harness._claims.loading import Catalogue, ClaimEntry, load_catalogue  # noqa: E402
from harness._claims.registry import NoParams, lookup, verifier  # noqa: E402
from harness._running.context import Context, ImplementationView  # noqa: E402
from harness._running.executor import SeedRun  # noqa: E402
from harness._running.property import assume, check_property  # noqa: E402
from harness._running.reaching import reach  # noqa: E402
from harness._running.runner import CheckResult, RunOptions, check_names, run_check  # noqa: E402
from harness.stats import MeanEstimate  # noqa: E402

__all__ = [
    "Catalogue",
    "CheckResult",
    "ClaimEntry",
    "ClaimsError",
    "Context",
    "Declined",
    "ImplementationError",
    "ImplementationView",
    "MeanEstimate",
    "NoParams",
    "Problem",
    "RegistryError",
    "RunOptions",
    "SeedRun",
    "Unsupported",
    "VerifierError",
    "assume",
    "check_names",
    "check_property",
    "load_catalogue",
    "lookup",
    "reach",
    "run_check",
    "stats",
    "verifier",
]
