"""The claim-verification engine: every checkable statement of a course text, checked against an implementation.

Which course, and where its claims, sources and reference implementation are, is the project's
``[tool.claims]`` table in pyproject.toml (``claims_harness._claims.course``).

Verifiers use :func:`verifier` to register, receive a :class:`Context`, and return a mapping
of observed values; the harness compares those with what the claim file expects. They call
:func:`reach` with the values each witness or drawn example used (the discount, the number of
actions, ...), which the report compares with the scope each statement speaks for. A program (a
notebook, a test) loads the claims with :func:`load_catalogue` and runs one check with
:func:`run_check`, configured by :class:`RunOptions`. A property (:func:`given`, or :func:`check_property`) draws its
examples from :mod:`claims_harness.strategies` (``from claims_harness import strategies as st``): Hypothesis'
vocabulary, as descriptions the harness reads.

The names are imported on first use (PEP 562): pytest loads ``claims_harness.plugin`` in every run of an environment the
package is installed in, and outside a course that must cost next to nothing.
"""

import importlib
from typing import Any

# Each public name, and the module it is defined in ("errors", "stats" and "strategies" are the modules themselves).
_DEFINED_IN = {
    "Catalogue": "claims_harness._claims.loading",
    "CheckResult": "claims_harness._running.runner",
    "ClaimEntry": "claims_harness._claims.claim_file",
    "ClaimsError": "claims_harness.errors",
    "Context": "claims_harness._running.context",
    "Declined": "claims_harness._claims.plain",
    "ImplementationError": "claims_harness.errors",
    "ImplementationView": "claims_harness._running.context",
    "MeanEstimate": "claims_harness.stats",
    "NoParams": "claims_harness._claims.registry",
    "Problem": "claims_harness.errors",
    "RegistryError": "claims_harness.errors",
    "RunOptions": "claims_harness._running.options",
    "SeedRun": "claims_harness._running.executor",
    "Unsupported": "claims_harness.errors",
    "VerifierError": "claims_harness.errors",
    "assume": "claims_harness._running.property",
    "check_names": "claims_harness._running.runner",
    "check_property": "claims_harness._running.property",
    "errors": "claims_harness.errors",
    "given": "claims_harness._running.property",
    "load_catalogue": "claims_harness._claims.loading",
    "lookup": "claims_harness._claims.registry",
    "Rounded": "claims_harness._claims.plain",
    "reach": "claims_harness._running.reaching",
    "run_check": "claims_harness._running.runner",
    "stats": "claims_harness.stats",
    "strategies": "claims_harness.strategies",
    "verifier": "claims_harness._claims.registry",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = (importlib.import_module(module) if module == f"{__name__}.{name}"
             else getattr(importlib.import_module(module), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "Rounded",
    "RunOptions",
    "SeedRun",
    "Unsupported",
    "VerifierError",
    "assume",
    "check_names",
    "check_property",
    "errors",
    "given",
    "load_catalogue",
    "lookup",
    "reach",
    "run_check",
    "stats",
    "strategies",
    "verifier",
]
