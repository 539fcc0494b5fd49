"""What crosses from a worker to the judge, and from the cache to a run: plain data only, never code.

A pickle names the classes to rebuild its objects with and may call any of them, so reading one that
an implementation under test wrote, or shaped, would run its code in the process that judges. What
the judge reads is therefore unpickled with an allow-list (the standard library's documented way to
restrict unpickling, ``Unpickler.find_class``): NumPy arrays, dtypes and scalars, Fractions, the
builtin containers and numbers, and the harness's own result and error types. Anything else is
refused, and a refused answer is an error row, a refused cache entry a miss.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from harness._claims.errors import ClaimsError

# (module, name) pairs a plain pickle may name: how NumPy pickles arrays, dtypes and scalars (both module
# paths NumPy has used), Fractions, and the builtins pickle reaches for containers and numbers.
_ALLOWED = {
    *((module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray")
      for name in ("_reconstruct", "scalar")),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("fractions", "Fraction"),
    *(("builtins", name) for name in ("complex", "set", "frozenset", "slice", "range", "bytearray", "getattr")),
    ("copyreg", "_reconstructor"), ("builtins", "object"),
}
_HARNESS = __name__.partition(".")[0]


class NotPlain(pickle.UnpicklingError):
    """A pickle that names a class outside the allow-list: not plain data."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED or (module.startswith("numpy.dtypes") and name.endswith("DType")):
            return super().find_class(module, name)
        if module.partition(".")[0] == _HARNESS:
            found = super().find_class(module, name)
            # The harness's own errors, and the result types that say so (``__plain_data__ = True``).
            if isinstance(found, type) and (issubclass(found, ClaimsError) or found.__dict__.get("__plain_data__")):
                return found
        raise NotPlain(f"{module}.{name} is not plain data")


def plain_loads(data: bytes) -> Any:
    """``pickle.loads(data)`` for plain data only; ``NotPlain`` (a ``pickle.UnpicklingError``) for anything else."""
    return _PlainUnpickler(io.BytesIO(data)).load()
