"""What crosses between the judge and the implementation's process, and into the cache: data, never code.

A pickle names the classes to rebuild its objects with and may call any of them, so no byte the
implementation's process writes is ever unpickled. This is the one format for every such byte:
a JSON document (numbers, strings, lists and tagged objects) and the raw bytes of the arrays it
holds, read as the plain dtype and shape the document states (never an object dtype). Decoding
builds only NumPy arrays and scalars, Fractions, the builtin containers and numbers, and two harness types: a
:class:`Record` (the fields of a named tuple or a dataclass, by name) and a :class:`Handle` (an
object of the implementation's process that stays there: an environment, a figure). Nothing it
reads names a module, a function or a class that decoding would import or call.

Written here rather than taken from a library: JSON and NumPy's buffers are the libraries (``.npy``
files cost a header per array, and a call crosses with dozens); what is the contract's own is which
Python values are data (a Fraction, an object array of them, a named tuple as its fields), and that
anything else stays in the process that made it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from claims_harness.errors import NotData

# NumPy's bit generators, whose state a generator crosses as.
GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
# The most a message may hold: a CartPole run's diagnostics are a few MB, a hostile answer is refused before parsing.
MAX_MESSAGE_BYTES = 1 << 30
_ARRAY_KINDS = "biufcSU"  # booleans, integers, floats, complex numbers, byte and unicode strings
# The key of a tagged object; a mapping that holds it as a key, or a key that is not a string, is written tagged.
_TAG = "§"
_TAGGED_KEYS = frozenset({_TAG, "v", "i", "d", "dtype", "shape", "type", "tuple", "id", "kind"})
_JSON_SCALARS = frozenset({type(None), bool, int, float, str})


class Record:
    """The fields of a named tuple or a dataclass, as data: read by attribute (``run.params``), by position when it
    was a tuple (``logits, values, _ = output``), and compared by type name and fields."""

    __slots__ = ("_type", "_fields", "_values", "_is_tuple", "_derived")

    def __init__(self, type_name: str, fields: Mapping[str, Any], is_tuple: bool = False,
                 derived: Mapping[str, Any] | None = None):
        object.__setattr__(self, "_type", str(type_name))
        object.__setattr__(self, "_fields", tuple(fields))
        object.__setattr__(self, "_values", tuple(fields.values()))
        object.__setattr__(self, "_is_tuple", bool(is_tuple))
        # What the class's properties gave where it was made (``config.batch_size``): read like fields, never sent back.
        object.__setattr__(self, "_derived", dict(derived or {}))

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            return self._values[self._fields.index(name)]
        if name in self._derived:
            return self._derived[name]
        raise AttributeError(f"{self._type} has no field '{name}' (its fields: {', '.join(self._fields)})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._type} is read-only data")

    def __getitem__(self, index: Any) -> Any:
        if not self._is_tuple:
            raise TypeError(f"{self._type} is no tuple: read its fields by name")
        return self._values[index]

    def __iter__(self) -> Iterator[Any]:
        if not self._is_tuple:
            raise TypeError(f"{self._type} is no tuple: read its fields by name")
        return iter(self._values)

    def __len__(self) -> int:
        if not self._is_tuple:
            raise TypeError(f"{self._type} is no tuple: read its fields by name")
        return len(self._values)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self._values, strict=True))

    def _replace(self, **changes: Any) -> Record:
        return Record(self._type, {**self._asdict(), **changes}, self._is_tuple)  # what was derived may change

    @property
    def __dataclass_fields__(self) -> dict[str, None]:  # what verifiers list a dataclass's fields by
        return dict.fromkeys(self._fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self._type, self._fields) == (other._type, other._fields) and all(
            _same(mine, theirs) for mine, theirs in zip(self._values, other._values, strict=True))

    def __hash__(self) -> int:
        return hash((self._type, self._fields))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={_short(value)}" for name, value in zip(self._fields, self._values, strict=True))
        return f"{self._type.rpartition('.')[2]}({fields})"

    def __reduce__(self) -> Any:
        return Record, (self._type, self._asdict(), self._is_tuple, self._derived)


def _same(one: Any, other: Any) -> bool:
    if isinstance(one, np.ndarray) or isinstance(other, np.ndarray):
        return np.array_equal(np.asarray(one), np.asarray(other))
    return bool(one == other)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclasses.dataclass(frozen=True)
class Handle:
    """An object of the implementation's process that is not data (an environment, a figure): it stays there, and
    its id is all that crosses. ``kind`` is its type's name, for messages."""


    id: int
    kind: str


IMPLEMENTATION = "implementation"  # the tag of the implementation's module itself (``ops=ctx.impl``)


def encode(value: Any, handle: Callable[[Any], Handle | None] | None = None,
           records: Collection[type] = ()) -> bytes:
    """``value`` as a message. ``handle`` makes a :class:`Handle` of a value that is not data (in the implementation's
    process); without it, such a value is an error naming its type. ``records`` are classes whose instances are
    written as their fields whatever methods they have (the harness's own results: :func:`decode`'s ``known``).

    Raises:
      NotData: for a value that is neither data nor given a handle.
    """
    writing = _Writing([], handle, tuple(records))
    document = json.dumps(writing.value(value, 0), allow_nan=False, separators=(",", ":"))
    head = document.encode("utf-8")
    parts = [len(head).to_bytes(8, "little"), head]
    for array in writing.arrays:
        parts += [len(array).to_bytes(8, "little"), array]
    return b"".join(parts)


_DEPTH = 200


@dataclasses.dataclass(frozen=True)
class _Writing:
    """One message being encoded: the arrays written so far, what makes handles, which classes are records."""

    arrays: list[bytes]
    handle: Callable[[Any], Handle | None] | None
    records: tuple[type, ...]

    def value(self, value: Any, depth: int) -> Any:
        if depth > _DEPTH:
            raise NotData(f"a value nested more than {_DEPTH} deep")
        kind = type(value)
        if value is None or kind in (bool, str):
            return value
        if kind is int:
            return value if abs(value) < 2**53 else {_TAG: "int", "v": str(value)}
        if kind is float:
            return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
        nested = depth + 1
        if kind is list or kind is range:
            return [self.value(item, nested) for item in value]
        if kind is tuple:
            return {_TAG: "tuple", "v": [self.value(item, nested) for item in value]}
        if kind is dict:
            if _TAG not in value and all(type(key) is str for key in value):
                return {key: self.value(item, nested) for key, item in value.items()}
            return {_TAG: "dict", "v": [[self.value(key, nested), self.value(item, nested)]
                                        for key, item in value.items()]}
        if kind is Fraction:
            return {_TAG: "fraction", "v": [str(value.numerator), str(value.denominator)]}
        if kind is complex:
            return {_TAG: "complex", "v": [self.value(value.real, nested), self.value(value.imag, nested)]}
        if kind is bytes:
            return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
        if kind is np.ndarray:
            return self._array(value, nested)
        if isinstance(value, np.generic) and kind.__module__ == "numpy":
            return {_TAG: "scalar", "dtype": value.dtype.str, "v": self.value(value.item(), nested)} \
                if value.dtype.kind in "biufc?" else self.value(value.item(), nested)
        if kind in (set, frozenset):
            return {_TAG: kind.__name__, "v": [self.value(item, nested) for item in value]}
        if kind is Record:
            return {_TAG: "record", "type": value._type, "tuple": value._is_tuple,
                    "v": [[name, self.value(item, nested)] for name, item in value._asdict().items()],
                    "d": [[name, self.value(item, nested)] for name, item in value._derived.items()]}
        if kind is Handle:
            return {_TAG: "handle", "id": value.id, "kind": value.kind}
        if kind is np.random.Generator:  # its state is data: the other side gets a generator in the same state
            state = value.bit_generator.state
            return {_TAG: "generator", "kind": state["bit_generator"], "v": self.value(state, nested)}
        record = _as_record(value, kind in self.records)
        if record is not None:
            return self.value(record, depth)
        made = self.handle(value) if self.handle is not None else None
        if made is None:
            raise NotData(f"a {kind.__module__}.{kind.__qualname__}, which is not data (numbers, strings, arrays, "
                          "Fractions, and tuples, lists, dicts, named tuples and dataclasses of them)")
        return {_TAG: "handle", "id": made.id, "kind": made.kind}

    def _array(self, array: np.ndarray, depth: int) -> Any:
        if array.dtype.kind == "O":
            return {_TAG: "objects", "shape": list(array.shape), "v": [self.value(item, depth) for item in array.flat]}
        if not _plain_dtype(array.dtype):
            raise NotData(f"an array of dtype {array.dtype}, which is not data")
        self.arrays.append(np.ascontiguousarray(array).tobytes())
        return {_TAG: "array", "i": len(self.arrays) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}


def _plain_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in _ARRAY_KINDS and dtype.fields is None and dtype.subdtype is None


def _as_record(value: Any, known: bool = False) -> Record | None:
    """A named tuple's or a dataclass instance's fields as a :class:`Record`; None for anything else, and for one
    whose class has a public method of its own, unless it is ``known`` (an environment is an object, not its
    fields; its properties are read into the record)."""
    kind = type(value)
    if not known and _has_behaviour(kind):
        return None
    name = f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return Record(name, dict(zip(kind._fields, value, strict=True)), True, _derived(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return Record(name, {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}, False,
                      {} if known else _derived(value))
    return None


def _derived(value: Any) -> dict[str, Any]:
    """The values of the public properties of ``value``'s class that it can give (one that raises is left out)."""
    found = {}
    for name in dict.fromkeys(name for base in type(value).__mro__ for name, member in vars(base).items()
                              if isinstance(member, property) and not name.startswith("_")):
        try:
            found[name] = getattr(value, name)
        except Exception:  # noqa: S112 (a property that cannot be computed is not part of the value)
            continue
    return found


def _has_behaviour(kind: type) -> bool:
    """Whether the class defines a public method."""
    return any(not name.startswith("_") and (callable(member) or isinstance(member, classmethod | staticmethod))
               for base in kind.__mro__ if base not in (object, tuple) for name, member in vars(base).items())


def decode(data: bytes, handles: Callable[[Handle], Any] | None = None, known: Mapping[str, type] | None = None
           ) -> Any:
    """The value a message holds. ``handles`` turns each :class:`Handle` into what stands for it here (the object
    itself in the implementation's process, a proxy in the judge's); without it, a handle stays a Handle.
    ``known`` maps a record's type name to the class of this process that it is built as (the harness's own frozen
    dataclasses, as the judge reads its workers' answers and its cache); any other record stays a :class:`Record`.

    Raises:
      NotData: for bytes that are not a message of this format.
    """
    view = memoryview(data)
    if len(view) > MAX_MESSAGE_BYTES:
        raise NotData(f"a message of {len(view)} bytes; at most {MAX_MESSAGE_BYTES} are read")
    try:
        size = int.from_bytes(view[:8], "little")
        document = json.loads(bytes(view[8:8 + size]).decode("utf-8"), parse_constant=_refuse_constant)
        arrays, at = [], 8 + size
        while at < len(view):
            length = int.from_bytes(view[at:at + 8], "little")
            if at + 8 + length > len(view):
                raise ValueError("an array runs past the end of the message")
            arrays.append(view[at + 8:at + 8 + length])
            at += 8 + length
        return _Reading(arrays, handles, known or {}).value(document, 0)
    except NotData:
        raise
    except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError, OverflowError, RecursionError) as error:
        raise NotData(f"not a message of plain data ({type(error).__name__}: {error})") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"the JSON constant {name}")


@dataclasses.dataclass(frozen=True)
class _Reading:
    """One message being decoded: its arrays, and what handles and known records become."""

    arrays: list[memoryview]
    handles: Callable[[Handle], Any] | None
    known: Mapping[str, type]

    def value(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind in _JSON_SCALARS:
            return value
        if depth > _DEPTH:
            raise NotData(f"a value nested more than {_DEPTH} deep")
        nested = depth + 1
        if kind is list:
            return [self.value(item, nested) for item in value]
        if kind is not dict:
            raise NotData(f"an object that is no tagged value: {str(value)[:80]}")
        tag = value.get(_TAG)
        if tag is None:  # a mapping with string keys, as JSON writes it
            return {key: self.value(item, nested) for key, item in value.items()}
        if not value.keys() <= _TAGGED_KEYS:
            raise NotData(f"an object that is no tagged value: {str(value)[:80]}")
        items = value.get("v")
        if tag == "int":
            return int(items)
        if tag == "float":
            number = float(items)
            if not (math.isinf(number) or math.isnan(number)):
                raise NotData(f"a float tagged as not finite: {items!r}")
            return number
        if tag == "tuple":
            return tuple(self.value(item, nested) for item in items)
        if tag == "dict":
            return {_key(self.value(key, nested)): self.value(item, nested) for key, item in items}
        if tag == "fraction":
            return Fraction(int(items[0]), int(items[1]))
        if tag == "complex":
            return complex(self.value(items[0], nested), self.value(items[1], nested))
        if tag == "bytes":
            return base64.b64decode(items, validate=True)
        if tag == "array":  # its bytes, read as the plain dtype and shape the message states
            dtype = np.dtype(str(value["dtype"]))
            if not _plain_dtype(dtype):
                raise NotData(f"an array of dtype {dtype}")
            shape = tuple(int(size) for size in value["shape"])
            return np.frombuffer(self.arrays[value["i"]], dtype=dtype).reshape(shape).copy()
        if tag == "objects":
            shape = tuple(int(size) for size in value["shape"])
            array = np.empty(shape, dtype=object)
            flat = [self.value(item, nested) for item in items]
            if len(flat) != array.size:
                raise NotData(f"an object array of shape {shape} with {len(flat)} elements")
            array.flat[:] = flat
            return array
        if tag == "scalar":
            dtype = np.dtype(value["dtype"])
            if dtype.kind not in "biufc?":
                raise NotData(f"a scalar of dtype {dtype}")
            return dtype.type(self.value(items, nested))
        if tag in ("set", "frozenset"):
            made = [self.value(item, nested) for item in items]
            return set(made) if tag == "set" else frozenset(made)
        if tag == "record":
            return self._record(str(value["type"]), {str(name): self.value(item, nested) for name, item in items},
                                bool(value["tuple"]),
                                {str(name): self.value(item, nested) for name, item in value.get("d", [])})
        if tag == "handle":
            handle = Handle(int(value["id"]), str(value["kind"]))
            return self.handles(handle) if self.handles is not None else handle
        if tag == "generator":
            if value["kind"] not in GENERATORS:
                raise NotData(f"a generator of kind {value['kind']!r}; the kinds are {', '.join(GENERATORS)}")
            made = np.random.Generator(getattr(np.random, value["kind"])(0))  # seeded: no entropy to gather
            made.bit_generator.state = self.value(items, nested)
            return made
        raise NotData(f"an unknown tag {tag!r}")

    def _record(self, name: str, fields: dict[str, Any], is_tuple: bool, derived: dict[str, Any]) -> Any:
        kind = self.known.get(name)
        if kind is None:
            return Record(name, fields, is_tuple, derived)
        try:
            return kind(**fields)
        except TypeError as error:
            raise NotData(f"a {name} whose fields do not fit it ({error})") from None


def _key(key: Any) -> Any:
    if isinstance(key, list | dict | set | np.ndarray):
        raise NotData(f"a dict key of type {type(key).__name__}")
    return key
