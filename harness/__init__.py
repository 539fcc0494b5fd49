"""The claim-verification engine: every checkable statement of a course text, checked against an implementation.

Which course, and where its claims, sources and reference implementation are, is the project's
``[tool.claims]`` table in pyproject.toml (``harness._claims.course``).

Verifiers use :func:`verifier` to register, receive a :class:`Context`, and return a mapping
of observed values; the harness compares those with what the claim file expects. They call
:func:`reach` with the values each witness or drawn example used (the discount, the number of
actions, ...), which the report compares with the scope each statement speaks for. A program (a
notebook, a test) loads the claims with :func:`load_catalogue` and runs one check with
:func:`run_check`, configured by :class:`RunOptions`. A property (:func:`check_property`) draws its
examples from :mod:`harness.strategies` (``from harness import strategies as st``): Hypothesis'
vocabulary, as descriptions the harness reads.

The names are imported on first use (PEP 562): pytest loads ``harness.plugin`` in every run of an environment the
package is installed in, and outside a course that must cost next to nothing.
"""

import importlib
from typing import Any

# Each public name, and the module it is defined in ("stats" and "strategies" are the modules themselves).
_DEFINED_IN = {
    "Catalogue": "harness._claims.loading",
    "CheckResult": "harness._running.runner",
    "ClaimEntry": "harness._claims.loading",
    "ClaimsError": "harness._claims.errors",
    "Context": "harness._running.context",
    "Declined": "harness._claims.expect",
    "ImplementationError": "harness._claims.errors",
    "ImplementationView": "harness._running.context",
    "MeanEstimate": "harness.stats",
    "NoParams": "harness._claims.registry",
    "Problem": "harness._claims.errors",
    "RegistryError": "harness._claims.errors",
    "RunOptions": "harness._running.runner",
    "SeedRun": "harness._running.executor",
    "Unsupported": "harness._claims.errors",
    "VerifierError": "harness._claims.errors",
    "assume": "harness._running.property",
    "check_names": "harness._running.runner",
    "check_property": "harness._running.property",
    "load_catalogue": "harness._claims.loading",
    "lookup": "harness._claims.registry",
    "Rounded": "harness._claims.expect",
    "reach": "harness._running.reaching",
    "run_check": "harness._running.runner",
    "stats": "harness.stats",
    "strategies": "harness.strategies",
    "verifier": "harness._claims.registry",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = (importlib.import_module(module) if module == f"harness.{name}"
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
    "load_catalogue",
    "lookup",
    "reach",
    "run_check",
    "stats",
    "strategies",
    "verifier",
]
