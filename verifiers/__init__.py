"""Check functions, registered by name; claim files refer to them only by that name.

A verifier receives a :class:`claims_harness.Context` (the implementation under test, parameters,
a seeded generator, the profile) and returns a mapping of observed values. It computes; the
harness compares with what the claim states. Verifiers never import ``impl``.

Importing this package imports every public module in it, which registers its verifiers.
"""

import importlib
import pkgutil

__all__ = sorted(module.name for module in pkgutil.iter_modules(__path__) if not module.name.startswith("_"))

for _module in __all__:
    importlib.import_module(f"{__name__}.{_module}")
