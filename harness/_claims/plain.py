"""What an observation is as data, in one place: the three forms a value takes on its way to the report.

* :func:`plain`: what the implementation returned, taken out of any subclass that could redefine arithmetic or
  comparisons (a verifier's arithmetic is then NumPy's and Python's own), applied where the function ran;
* :func:`as_plain_observation`: a verifier's observation with every sympy value as a bool, a Fraction or its text,
  so that it crosses from the worker to the judge as data (``claims_harness._running.wire``);
* :func:`to_jsonable`: an observation as the results file holds it (a Fraction beside its float).

Two kinds of observation are the harness's own: :class:`Rounded` (a float64 result with its rounding bound) and
:class:`Declined` (a value the implementation could not give).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from claims_harness.errors import NotPlainData
from claims_harness.stats import MeanEstimate


@dataclass(frozen=True)
class Rounded:
    """A number computed in float64 by an implementation that cannot compute in fractions, with the bound on its
    float64 rounding that the verifier derived (``verifiers._numeric.rounding_bound``): a float twin's observation.

    An exact expectation holds when the written number lies within ``bound`` of ``value``; an inequality must hold
    for every number within it; an approximate one within its printed tolerance plus the bound.
    """

    value: float
    bound: float

    def as_dict(self) -> dict[str, float]:
        return {"float64": self.value, "rounding_bound": self.bound}


@dataclass(frozen=True)
class Declined:
    """An observation the implementation could not give, because it declines the call that gives it
    (:class:`~claims_harness.errors.Unsupported`): the row is reported as not checked, never compared."""

    reason: str


# --------------------------------------------------------------------------- what the implementation returned


# Scalar types whose arithmetic and comparisons are NumPy's or Python's own; the numbers among them.
_NUMBERS = frozenset({float, int, bool, complex, Fraction, *(np.dtype(code).type for code in "?bhilqBHILQefdgFDG")})
_PLAIN_SCALARS = _NUMBERS | {str, bytes, type(None)}


def plain(value: Any) -> Any:
    """``value`` with every subclass of an array, a number or a Fraction in it replaced by the base type.

    A verifier compares what the implementation returned with arithmetic and comparisons
    (``np.abs(advantages - expected) <= bound``). An ndarray subclass, or a float or Fraction
    subclass, can redefine those to make any result pass, so the value the implementation
    reported is taken out of it: an array is viewed as a plain ndarray (no copy), a number is
    converted, and an object array's elements, tuples (named ones kept), lists, dicts and
    dataclass fields are converted in turn. A value of any other type that defines arithmetic,
    comparisons, conversions to numbers or arrays, or iteration (``_DATA_PROTOCOL``) only pretends
    to be data, and so does an object array of anything but numbers and sequences of them: both
    raise ``NotPlainData``. Anything else (an environment, a figure), and a value that is already
    plain, is returned as it is, so a correct implementation's results are the same objects. How a
    type is converted is worked out once per type: a training loop's results pass here at every step.
    """
    kind = type(value)
    if kind is np.ndarray:
        return value if value.dtype.kind != "O" else _plain_objects(value)
    if kind in _PLAIN_SCALARS:
        return value
    convert = _CONVERTERS.get(kind)
    if convert is None:
        convert = _CONVERTERS[kind] = _converter(kind)
    return convert(value)


_CONVERTERS: dict[type, Callable[[Any], Any]] = {}
_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def _converter(kind: type) -> Callable[[Any], Any]:
    """How :func:`plain` converts a value of ``kind``, a type that is neither ndarray nor a plain scalar."""
    if issubclass(kind, np.ndarray):
        return lambda value: plain(value.view(np.ndarray))
    if issubclass(kind, np.generic):
        return lambda value: np.asarray(value).view(np.ndarray)[()]
    if issubclass(kind, Fraction):
        return lambda value: Fraction(plain(value.numerator), plain(value.denominator))
    for number in (int, float, complex):  # bool cannot be subclassed
        if issubclass(kind, number):
            return number
    if issubclass(kind, (tuple, list)):
        return functools.partial(_plain_sequence, kind, kind in (tuple, list) or hasattr(kind, "_make"))
    if issubclass(kind, dict):
        return functools.partial(_plain_mapping, kind is dict)
    if issubclass(kind, (set, frozenset)):
        return functools.partial(_plain_set, set if issubclass(kind, set) else frozenset, kind in (set, frozenset))
    if kind is range:  # Python's own integers, and its own comparisons
        return _identity
    if kind in _DICT_VIEWS:  # a dict's keys, values or items: a list of its entries, in order (a view cannot cross)
        return functools.partial(_plain_sequence, list, False)
    if dataclasses.is_dataclass(kind):
        return functools.partial(_plain_fields, tuple(field.name for field in dataclasses.fields(kind) if field.init))
    impersonated = [name for name in _DATA_PROTOCOL if _defines(kind, name)]
    if impersonated:
        return functools.partial(_refuse, f"a {kind.__module__}.{kind.__qualname__}, which defines "
                                          f"{', '.join(impersonated[:4])}")
    return _identity


# What a value must define to pass for a number, an array or a sequence of them in a verifier's arithmetic,
# comparisons and conversions. An object that is none of these (an environment, a figure) passes as it is.
_DATA_PROTOCOL = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__", "__int__",
                  "__index__", "__complex__", "__abs__", "__neg__", "__add__", "__radd__", "__sub__", "__rsub__",
                  "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__matmul__", "__rmatmul__",
                  "__array__", "__array_ufunc__", "__array_function__", "__array_interface__", "__len__",
                  "__iter__", "__getitem__")


def _defines(kind: type, name: str) -> bool:
    """Whether ``kind`` has ``name`` of its own, not object's."""
    found = getattr(kind, name, None)
    return found is not None and found is not getattr(object, name, None)


def _identity(value: Any) -> Any:
    return value


def _refuse(what: str, value: Any) -> Any:
    raise NotPlainData(what)


def _plain_sequence(kind: type, keeps_kind: bool, value: Any) -> Any:
    items = _converted(enumerate(value), list, value)
    if items is None:
        if keeps_kind:
            return value
        items = list(value)
    if hasattr(kind, "_make"):
        return kind._make(items)
    return tuple(items) if isinstance(value, tuple) else items


def _plain_set(base: type, keeps_kind: bool, value: Any) -> Any:
    items = [plain(item) for item in value]
    if keeps_kind and all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return base(items)


def _plain_mapping(keeps_kind: bool, value: dict[Any, Any]) -> dict[Any, Any]:
    items = _converted(value.items(), dict, value)
    if items is None:
        return value if keeps_kind else dict(value)
    return items


def _converted(pairs: Iterable[tuple[Any, Any]], copy: type, value: Any) -> Any:
    """``copy(value)`` with each item :func:`plain` changes replaced (by its key or index); None if none changed."""
    items = None
    for key, item in pairs:
        converted = plain(item)
        if converted is not item:
            if items is None:
                items = copy(value)
            items[key] = converted
    return items


def _plain_fields(names: tuple[str, ...], value: Any) -> Any:
    changed = {}
    for name in names:
        item = getattr(value, name)
        converted = plain(item)
        if converted is not item:
            changed[name] = converted
    return dataclasses.replace(value, **changed) if changed else value


def _plain_objects(array: np.ndarray) -> np.ndarray:
    """An object array whose elements are :func:`plain` (the same array when they already are); its elements
    must be numbers (Fractions, say, for exact arithmetic) or arrays and sequences of them."""
    try:
        elements = [plain(element) for element in array.flat]
    except NotPlainData as error:
        raise NotPlainData(f"an object array holding {error}") from None
    strangers = {type(element) for element in elements
                 if type(element) not in _NUMBERS and not isinstance(element, (np.ndarray, list, tuple))}
    if strangers:
        raise NotPlainData(f"an object array of {', '.join(sorted(kind.__qualname__ for kind in strangers))}")
    if all(new is old for new, old in zip(elements, array.flat, strict=True)):
        return array
    converted = np.empty(array.shape, dtype=object)
    converted.flat[:] = elements
    return converted


# --------------------------------------------------------------------------- a verifier's observation


def as_plain_observation(value: Any) -> Any:
    """An observation with every sympy value in it as the plain data the comparisons and the report make of it:
    a boolean as ``bool``, a number as :func:`sympy_rational`'s Fraction, any other expression as its text.

    A verifier's observations cross from its worker to the judge as plain data only
    (``claims_harness._running.wire``), which has no form for a sympy object.
    """
    sympy = sys.modules.get("sympy")
    if sympy is None:
        return value
    if isinstance(value, dict):
        return {key: as_plain_observation(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        items = [as_plain_observation(item) for item in value]
        return type(value)(items) if type(value) in (list, tuple) else items
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        converted = np.empty(value.shape, dtype=object)
        converted.flat[:] = [as_plain_observation(item) for item in value.flat]
        return converted
    if isinstance(value, sympy.logic.boolalg.BooleanAtom):
        return bool(value)
    if isinstance(value, sympy.Basic | sympy.MatrixBase):
        number = sympy_rational(value) if isinstance(value, sympy.Basic) else None
        return number if number is not None else str(value)
    return value


def sympy_rational(value: Any) -> Fraction | None:
    """A sympy number as a Fraction: exact for rationals, 60 significant digits otherwise."""
    import sympy

    if not isinstance(value, sympy.Basic) or not value.is_number:
        return None
    if value.is_Rational:
        return Fraction(int(value.p), int(value.q))
    if value.is_real is False:
        return None
    numeric = sympy.N(value, 60)
    return Fraction(str(numeric)) if numeric.is_finite else None


# --------------------------------------------------------------------------- the results file's form


def to_jsonable(value: Any) -> Any:
    """A JSON-ready form of an observed value; fractions keep their exact form beside a float."""
    if isinstance(value, MeanEstimate | Rounded):
        return value.as_dict()
    if isinstance(value, Declined):
        return f"not checked: {value.reason}"
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else {"exact": str(value), "value": float(value)}
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.item()) if value.ndim == 0 else [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    number = sympy_rational(value)
    if number is not None:
        return to_jsonable(number)
    return str(value)
