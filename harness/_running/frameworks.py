"""Implementations written in PyTorch or JAX: called with their arrays, answered in NumPy's, judged in float64.

A student's week-16 code is a loss module of a training codebase, almost always PyTorch. A
function whose module declares ``__claims_array_library__ = "torch"`` (or ``"jax"``), or, declaring
nothing, imports a module of torch (or jax) itself, is called with float64 CPU tensors (or
``jax.Array`` values) where the verifier passes NumPy arrays (inside tuples, lists and dicts too),
and what it returns comes back as NumPy arrays and Python numbers, so every claim of the functions
it provides runs against it. The verifiers compute in float64; a result in a narrower float, from
any library, NumPy's included, or on another device is an error naming the function and the dtype,
not a semantic failure. Exact arithmetic (object arrays of Fractions) has no tensor form: such a
check reports that it needs it (:class:`~claims_harness.errors.Inexpressible`), it does not fail,
and is counted as not judged. A declaration is a hint, never a way out of a check: a function said
to be PyTorch's that answers Fractions in NumPy is judged exactly, and one said to be NumPy's that
answers tensors for tensors is PyTorch code (:func:`computes_in_torch`). A PyTorch loss's gradient
is taken by autograd on the student's own graph (:func:`torch_gradient`); for NumPy and JAX code
the verifiers take it by central differences. A NumPy function that answers Fractions in floats (a ``dtype=float``,
a float literal in its arithmetic) declines exact arithmetic by what it returns, as a module does by declaring
``__claims_exact_arithmetic__ = False``.

The conversions are written here because they are this contract's, not a library's: which
arguments carry a graph, what counts as detached, and which dtype the harness judges in (the
array API standard's ``array-api-compat`` would name the namespace, but not these). PyTorch and JAX
are optional (``pip install -e '.[torch]'``, ``pip install jax``); nothing here imports either
unless an implementation is written in it.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np

from claims_harness.errors import ImplementationError, Inexpressible, Unsupported

ATTRIBUTE = "__claims_array_library__"
# A NumPy module that cannot compute in Fractions (an adapter of a float library) says so with False.
EXACT_ATTRIBUTE = "__claims_exact_arithmetic__"
LIBRARIES = ("numpy", "torch", "jax")
INSTALL_HINT = "install the optional extra: pip install -e '.[torch]' (the CPU wheel: pip install torch==2.13.0)"


@functools.lru_cache(maxsize=4096)
def library_of(function: Callable[..., Any]) -> str:
    """The array library ``function`` computes in: its module's declaration, else ``torch`` or ``jax`` if the module
    imported (a module of) either, else ``numpy``."""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    declared = getattr(module, ATTRIBUTE, None)
    if declared is not None:
        if declared not in LIBRARIES:
            raise ImplementationError(f"{module.__name__}.{ATTRIBUTE} = {declared!r}: use one of "
                                      f"{', '.join(map(repr, LIBRARIES))}")
        return declared
    imported = {value.__name__.partition(".")[0] for value in vars(module).values()
                if isinstance(value, ModuleType)} if module else set()
    return next((library for library in LIBRARIES[1:] if library in imported), "numpy")


def expect_float64_result(name: str, handed: Any, returned: Any) -> None:
    """Refuse a NumPy result in a float narrower than float64 when the harness handed float64 in.

    The verifiers' bounds are float64 rounding bounds; a float32 result (a library that stores its buffers
    in float32, JAX's default) misses them by rounding alone, and its failures would read as semantic ones.
    So the precision is named, once, in an error of its own.
    """
    narrower = _narrower_float(returned)
    if narrower is not None and _holds_float64(handed):
        raise ImplementationError(f"{name} returned {narrower} for float64 arguments: the harness judges in float64 "
                                  "(docs/implementation-contract.md), and a narrower float misses its bounds by "
                                  "rounding alone; compute in the dtype you were given (a library that works in "
                                  f"{narrower} cannot be judged at its own precision here)")


def _narrower_float(value: Any) -> str | None:
    """The name of a floating dtype narrower than float64 in ``value`` (inside tuples, lists and dicts), or None."""
    if isinstance(value, np.ndarray | np.inexact):
        return value.dtype.name if value.dtype.kind in "fc" and np.finfo(value.dtype).bits < 64 else None
    return next((found for found in map(_narrower_float, _items(value)) if found is not None), None)


def _items(value: Any) -> Any:
    """What a container the conversions look inside holds: a dict's values, a tuple's or a list's items; else none."""
    return value.values() if isinstance(value, dict) else value if isinstance(value, tuple | list) else ()


def _holds_float64(value: Any) -> bool:
    if isinstance(value, float | np.float64):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype == np.float64
    return any(map(_holds_float64, _items(value)))


@dataclass(frozen=True)
class _Library:
    """How arrays cross into one array library and back."""

    name: str  # as in ``__claims_array_library__``
    shown: str  # as in messages
    module: str  # what to import
    install: str

    def imported(self) -> ModuleType:
        try:
            return importlib.import_module(self.module)
        except ImportError:
            raise ImplementationError(f"the implementation is written in {self.shown}, which is not installed: "
                                      f"{self.install}") from None


_OTHER_LIBRARIES = {
    "torch": _Library("torch", "PyTorch", "torch", INSTALL_HINT),
    "jax": _Library("jax", "JAX", "jax.numpy", "pip install jax (on the CPU)"),
}


def _torch() -> ModuleType:
    return _OTHER_LIBRARIES["torch"].imported()


def call_implementation(function: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                        ) -> Any:
    """``function(*args, **kwargs)`` in the function's array library, answered in NumPy's types and float64.

    A PyTorch or JAX function gets every NumPy array as a tensor or a ``jax.Array`` and its result back as
    NumPy's; a result in a narrower float than the float64 handed in is refused (:func:`expect_float64_result`).
    """
    library = _OTHER_LIBRARIES.get(library_of(function))
    if library is None:
        if not _takes_fractions(function) and _holds_fractions((args, kwargs)):
            raise Inexpressible(f"needs exact arithmetic: this check passes Fractions, which {name} declines "
                                f"({function.__module__}.{EXACT_ATTRIBUTE} = False); it runs for an implementation "
                                "that computes in them")
        returned = _answered_in_numpy(name, _own_call(function, name, args, kwargs))
        if _holds_fractions((args, kwargs)) and _holds_floats(returned):
            # What a function returns decides, as for a library's declaration: floats for Fractions (a float dtype,
            # a float literal in the arithmetic) decline exact arithmetic; an exact comparison would fail code that
            # is right to the last bit of float64, reading "expected exactly 0.7, observed 0.7".
            raise Inexpressible(f"needs exact arithmetic: this check passes Fractions, which {name} answered in "
                                "floats; it is judged in float64 instead (its float twin, or replay), and exactly "
                                "once it computes in the Fractions it is given")
    elif _holds_fractions((args, kwargs)):
        returned = _exactly_in_numpy(library, function, name, args, kwargs)
    else:
        module = library.imported()
        returned = _from_library(library, module, _own_call(function, name, _to_library(library, module, args, name),
                                                            _to_library(library, module, kwargs, name)), name)
    expect_float64_result(name, (args, kwargs), returned)
    return returned


def _answered_in_numpy(name: str, returned: Any) -> Any:
    """What a function said to be NumPy's returned, with the arrays of another library it answered in (it is that
    library's code after all) converted as that library's are."""
    for library in _OTHER_LIBRARIES.values():
        if _holds_arrays_of(library, returned):
            return _from_library(library, sys.modules[library.module.partition(".")[0]], returned, name)
    return returned


def _exactly_in_numpy(library: _Library, function: Callable[..., Any], name: str, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """The exact answer of a function said to be written in ``library`` (declared, or its module imported it), if it
    computes in NumPy's Fractions after all: the declaration is a hint, what the function returns decides. One that
    cannot (it raises, or answers in the library's arrays) is not judged by this check: Fractions have no tensor."""
    cannot = Inexpressible(f"needs exact arithmetic: this check passes Fractions, for which {library.shown} has no "
                           f"dtype ({name} is written in {library.shown}); it runs for a NumPy implementation")
    try:
        returned = _own_call(function, name, args, kwargs)
    except (NotImplementedError, ImplementationError):
        raise
    except Exception as error:
        raise cannot from error
    if _holds_arrays_of(library, returned):
        raise cannot
    return returned


def _holds_arrays_of(library: _Library, value: Any) -> bool:
    """Whether ``value`` holds an array of ``library`` (inside tuples, lists and dicts)."""
    module = sys.modules.get(library.module.partition(".")[0])
    kind = getattr(module, "Tensor" if library.name == "torch" else "Array", None) if module else None
    if kind is not None and isinstance(value, kind):
        return True
    return any(_holds_arrays_of(library, item) for item in _items(value))


def computes_in_torch(function: Callable[..., Any], name: str, args: Sequence[Any]) -> bool:
    """Whether ``function`` is PyTorch code, whatever its module declares: said so (or imported torch), or, where
    torch is loaded at all, answering tensors for tensors. A PyTorch loss that declares itself NumPy's would get
    central differences in place of autograd, and its detach mistakes would go unseen."""
    if library_of(function) == "torch":
        return True
    if "torch" not in sys.modules:
        return False
    library = _OTHER_LIBRARIES["torch"]
    try:
        returned = function(*_to_library(library, sys.modules["torch"], tuple(args), name))
    except Exception:  # NumPy code handed tensors: it is not PyTorch's
        return False
    return _holds_arrays_of(library, returned)


def _takes_fractions(function: Callable[..., Any]) -> bool:
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    return getattr(module, EXACT_ATTRIBUTE, True) is not False


def _holds_fractions(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "O"
    if isinstance(value, Fraction):
        return True
    return any(map(_holds_fractions, _items(value)))


def _holds_floats(value: Any) -> bool:
    """Whether an answer holds a float anywhere: a float or complex dtype, a float scalar, a float inside an object
    array or a container."""
    if isinstance(value, float | complex | np.inexact):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc" or (value.dtype.kind == "O" and any(map(_holds_floats, value.flat)))
    return any(map(_holds_floats, _items(value)))


def _own_call(function: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call, with the harness's signals for what is not checked refused when the implementation raises them:
    a module that raised ``Unsupported`` itself would turn any check it fails into a skipped one, and one that
    raised a rejection (``claims_harness.assume``, ``hypothesis.assume``) every example of a property."""
    try:
        return function(*args, **kwargs)
    except (Unsupported, Inexpressible) as error:
        raise ImplementationError(f"{name} raised {type(error).__name__} ({error}), which is the harness's own "
                                  "signal of a call it cannot judge; an implementation may not raise it. Raise "
                                  "another exception, or leave out the keyword it does not support") from None
    except Exception as error:
        if not _is_rejection(error):
            raise
        raise ImplementationError(f"{name} raised {type(error).__name__} ({error}), which is the harness's signal "
                                  "that a verifier discards an example it drew; an implementation may not raise it "
                                  "(it would turn every example into a skipped one). Raise another exception, or "
                                  "return the value") from None


def _is_rejection(error: Exception) -> bool:
    """Whether ``error`` is the harness's or Hypothesis' rejection of an example (Hypothesis' only where it is
    imported: the harness does not load it for a property that holds, and code that did not import it cannot
    raise it)."""
    from claims_harness._running.draws import Rejected

    errors = sys.modules.get("hypothesis.errors")
    return isinstance(error, Rejected) or errors is not None and isinstance(error, errors.UnsatisfiedAssumption)


def _to_library(library: _Library, module: ModuleType, value: Any, name: str) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            raise Inexpressible(f"needs exact arithmetic: this check passes Fractions, for which {library.shown} has "
                                f"no dtype ({name} is written in {library.shown}); it runs for a NumPy implementation")
        copy = np.array(value)  # float64 stays float64, int64 and bool stay themselves
        if library.name == "torch":
            return module.from_numpy(copy)
        converted = module.asarray(copy)
        if converted.dtype != copy.dtype and copy.dtype == np.float64:
            raise ImplementationError(f"{name} is written in JAX with 64-bit floats off: the harness hands in "
                                      "float64 and judges in float64; enable them where the module is imported, "
                                      "jax.config.update('jax_enable_x64', True)")
        return converted
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_to_library(library, module, item, name) for item in value)
    if isinstance(value, list):
        return [_to_library(library, module, item, name) for item in value]
    if isinstance(value, dict):
        return {key: _to_library(library, module, item, name) for key, item in value.items()}
    return value


def _from_library(library: _Library, module: ModuleType, value: Any, name: str) -> Any:
    if library.name == "torch" and isinstance(value, module.Tensor):
        _expect_float64_cpu(module, value, name)
        array = value.detach().numpy()
        return array.item() if array.ndim == 0 else array
    if library.name == "jax" and isinstance(value, sys.modules["jax"].Array):
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array
    if isinstance(value, tuple):
        items = [_from_library(library, module, item, name) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_from_library(library, module, item, name) for item in value]
    if isinstance(value, dict):
        return {key: _from_library(library, module, item, name) for key, item in value.items()}
    return value


def _expect_float64_cpu(torch: ModuleType, tensor: Any, name: str) -> None:
    if tensor.device.type != "cpu":
        raise ImplementationError(f"{name} returned a tensor on {tensor.device}: the harness hands in CPU tensors "
                                  "and reads results on the CPU; keep them there")
    if tensor.is_floating_point() and tensor.dtype != torch.float64:
        raise ImplementationError(f"{name} returned {tensor.dtype}: the harness hands in torch.float64 tensors and "
                                  "judges in float64 (docs/implementation-contract.md); compute in the dtype you "
                                  "were given, e.g. torch.as_tensor(x, dtype=logp.dtype)")


def torch_gradient(function: Callable[..., Any], name: str, args: Sequence[Any], wrt: int, held: Sequence[int] = (),
                   tied: Sequence[int] = ()) -> tuple[np.ndarray, dict[int, float]]:
    """∂ function(*args) / ∂ args[wrt] by autograd on the implementation's own graph, and what leaked.

    ``args[wrt]`` is handed in as a float64 leaf that requires grad. The arguments in ``held`` (a loss's
    constants: ``logp_old``, ``adv``) are handed in requiring grad too, as they do when a trainer computed
    them from the model, so that a loss which does not detach them shows it: the largest |gradient| that
    reached each is returned by position (empty when none did). The arguments in ``tied`` are handed in as the
    very tensor ``args[wrt]``: at θ = θ_old a trainer's first epoch has logp_old equal to logp, and a loss that
    does not detach it has the gradient of a constant ratio, zero.

    Raises:
      ImplementationError: the result is not a one-element float64 tensor attached to the graph, or not finite;
        the message names the function, the arguments' shapes and what was expected.
    """
    torch = _torch()
    tensors = list(_to_library(_OTHER_LIBRARIES["torch"], torch, tuple(args), name))
    leaf = tensors[wrt].requires_grad_(True)
    for index in tied:
        tensors[index] = leaf
    constants = [tensors[index].requires_grad_(True) for index in held if index not in tied]
    shapes = ", ".join(str(tuple(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__ for t in tensors)
    loss = function(*tensors)
    if not isinstance(loss, torch.Tensor):
        raise ImplementationError(f"{name}({shapes}) returned {type(loss).__name__}, not a tensor: a loss returns a "
                                  "tensor attached to logp's graph (no .item(), no NumPy inside)")
    if loss.numel() != 1:
        raise ImplementationError(f"{name}({shapes}) returned shape {tuple(loss.shape)}: a loss is one number, the "
                                  "masked mean over the batch")
    _expect_float64_cpu(torch, loss, name)
    if loss.grad_fn is None:
        raise ImplementationError(f"{name}({shapes}) returned a tensor detached from logp's graph (no grad_fn): its "
                                  "gradient cannot be taken; compute the loss from logp with torch operations")
    if not bool(torch.isfinite(loss.detach()).all()):
        raise ImplementationError(f"{name}({shapes}) returned {loss.detach().reshape(()).item()}")
    gradients = torch.autograd.grad(loss.reshape(()), [leaf, *constants], allow_unused=True)
    gradient = gradients[0]
    leaked = {index: float(g.abs().max()) for index, g in zip([i for i in held if i not in tied], gradients[1:],
                                                               strict=True) if g is not None and bool((g != 0).any())}
    return (np.zeros(leaf.shape) if gradient is None else gradient.detach().numpy().copy()), leaked
