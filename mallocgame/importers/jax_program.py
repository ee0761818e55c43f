"""JAX importer: a JAX function -> XLA:CPU's scheduled HLO -> workload (extra ``mallocgame[jax]``).

``MODULE:FN`` (``package.module:function`` or ``path/to/file.py:function``; dots after the
colon reach attributes) names the function itself, compiled for the arguments ``--arg-shapes``
describes; without ``--arg-shapes`` it names a zero-argument factory that returns
``(function, example_arguments)``, whose arguments may be any pytrees (a parameter dict, an
optimizer state, a batch) of arrays or ``jax.ShapeDtypeStruct``. On the CPU backend::

    jax.jit(fn, donate_argnums=donate).lower(*ShapeDtypeStructs).compile().as_text()

and that scheduled HLO text is imported by :func:`mallocgame.importers.hlo.parse_hlo_text`,
exactly as ``mallocgame import hlo`` reads it from a file (same options, same workload).
``jax`` is imported only here, when a function is compiled; with no platform chosen
(``JAX_PLATFORMS`` unset) it is set to ``cpu`` first.

**Shapes.** ``'f32[8,128],bf16[512,512],s32[]'``: one XLA-style ``DTYPE[DIMS]`` per positional
argument (``pred``, ``s8``..``s64``, ``u8``..``u64``, ``f16``, ``bf16``, ``f32``, ``f64``,
``c64``, ``c128``; ``[]`` is a scalar). **Donation** (``--donate 0,2``): those arguments'
buffers may be reused for outputs (``input_output_alias`` in the HLO header; the importer
makes them in-place pairs).

**What differs from an accelerator's compile** (docs/xla_suite.md): XLA:CPU runs its own
pipeline and scheduler, so the schedule and the buffers are the CPU's -- CPU fusion decisions
(more, smaller loop fusions; dots and convolutions as library calls), no async collectives
or host offload, no memory-space assignment, bf16 arithmetic often up-cast to f32 up front.

Example (needs jax):
    >>> p = import_jax("mallocgame.importers.jax_program:_example", "f32[8,128],f32[128,64]")  # doctest: +SKIP
    >>> p.n > 0  # doctest: +SKIP
    True
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mallocgame.formats.io import atomic_write_text
from mallocgame.importers._common import resolve_callable
from mallocgame.importers.hlo import parse_hlo_text
from mallocgame.problem.model import InputError, Problem

DTYPES = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8", "u16": "uint16",
    "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
}
_ARG = re.compile(r"^([a-z0-9]+)\[([0-9,\s]*)\]$")


@dataclass(frozen=True)
class ArgShape:
    dtype: str  # an XLA name (f32, bf16, ...)
    dims: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def parse_arg_shapes(text: str) -> list[ArgShape]:
    """``'f32[8,128],bf16[512,512]'`` -> ``[ArgShape('f32', (8, 128)), ArgShape('bf16', (512, 512))]``.

    >>> [str(a) for a in parse_arg_shapes("f32[8,128], s32[]")]
    ['f32[8,128]', 's32[]']
    """
    items, depth, cur = [], 0, ""
    for ch in text.strip():
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for item in items:
        item = item.strip()
        m = _ARG.match(item)
        if not m:
            raise InputError(f"--arg-shapes {text!r}: {item!r} is not DTYPE[D1,D2,...] (e.g. f32[8,128], s32[])")
        dtype, dims = m.group(1), m.group(2).replace(" ", "")
        if dtype not in DTYPES:
            raise InputError(f"--arg-shapes {text!r}: unknown dtype {dtype!r} (one of {', '.join(DTYPES)})")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            raise InputError(f"--arg-shapes {text!r}: {item!r} has an empty dimension") from None
        if any(d <= 0 for d in shape):
            raise InputError(f"--arg-shapes {text!r}: {item!r}: dimensions must be positive")
        out.append(ArgShape(dtype, shape))
    return out


def parse_donate(text: str | Sequence[int] | None, n_args: int) -> tuple[int, ...]:
    """``'0,2'`` -> ``(0, 2)``, each an argument index below ``n_args``."""
    if text is None or text == "":
        return ()
    if isinstance(text, str):
        try:
            idx = tuple(int(p) for p in text.replace(" ", "").split(","))
        except ValueError:
            raise InputError(f"--donate {text!r}: expected argument indices like 0,2") from None
    else:
        idx = tuple(int(i) for i in text)
    bad = [i for i in idx if not 0 <= i < n_args]
    if bad:
        raise InputError(f"--donate: argument {bad[0]} does not exist (the function takes {n_args})")
    return tuple(sorted(set(idx)))


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``module.path:fn`` or ``file.py:fn`` to the function (not called)."""
    return resolve_callable(spec, what="function", prefix="_mallocgame_jax_")


def _jax():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
    except ImportError as exc:
        raise InputError(f"jax is not installed ({exc}): pip install 'mallocgame[jax]'") from None
    return jax


def example_arguments(factory: Callable[..., Any], where: str) -> tuple[Callable[..., Any], tuple]:
    """``(function, arguments)`` from a zero-argument factory (what ``SPEC`` names without ``--arg-shapes``):
    the arguments are pytrees (a parameter dict, an optimizer state, a batch) of arrays or
    ``jax.ShapeDtypeStruct``; every leaf with a shape and a dtype becomes a ``ShapeDtypeStruct``."""
    jax = _jax()
    try:
        made = factory()
    except TypeError as exc:
        raise InputError(f"{where}: without --arg-shapes, SPEC names a zero-argument callable that returns "
                         f"(function, example arguments); calling it failed ({exc})") from None
    except Exception as exc:  # the user's factory: one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"{where}: calling it failed ({type(exc).__name__}: {first[:300]})") from None
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])
            and isinstance(made[1], (tuple, list))):
        raise InputError(f"{where}: without --arg-shapes, SPEC names a zero-argument callable that returns "
                         f"(function, example arguments), got {type(made).__name__}")
    func, args = made

    def struct(leaf: Any) -> Any:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype)
        return leaf
    return func, tuple(jax.tree_util.tree_map(struct, tuple(args)))


def compile_hlo_text(fn: Callable[..., Any] | str, arg_shapes: str | Sequence[ArgShape] | None,
                     donate: str | Sequence[int] | None = None) -> str:
    """XLA:CPU's scheduled HLO text of ``fn`` (a function or ``MODULE:FN``) for ``arg_shapes``; with
    ``arg_shapes`` ``None``, ``fn`` is a factory returning the function and its example arguments
    (:func:`example_arguments`: pytrees welcome)."""
    where = fn if isinstance(fn, str) else getattr(fn, "__name__", "function")
    func = load_function(fn) if isinstance(fn, str) else fn
    jax = _jax()
    import jax.numpy as jnp

    if arg_shapes is None:
        func, structs = example_arguments(func, where)
        shapes = [f"{type(a).__name__}" if not hasattr(a, "shape") else f"{a.dtype}{list(a.shape)}"
                  for a in structs]
    else:
        shapes = parse_arg_shapes(arg_shapes) if isinstance(arg_shapes, str) else list(arg_shapes)
        structs = [jax.ShapeDtypeStruct(s.dims, getattr(jnp, DTYPES[s.dtype])) for s in shapes]
    donated = parse_donate(donate, len(structs))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
            cpu = jax.devices("cpu")[0]
            with jax.default_device(cpu):
                compiled = jax.jit(func, donate_argnums=donated).lower(*structs).compile()
        return compiled.as_text()
    except Exception as exc:  # tracing or compiling the user's function: one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"{where}: jax.jit(...).lower({', '.join(map(str, shapes))}).compile() failed "
                         f"({type(exc).__name__}: {first[:300]})") from None


def load_jax(fn: Callable[..., Any] | str, arg_shapes: str | Sequence[ArgShape] | None, *,
             donate: str | Sequence[int] | None = None, name: str | None = None, max_expanded_ops: int = 200_000,
             hlo_output: str | None = None, loop_state: str = "fresh"):
    """Compile ``fn`` and import its HLO as ``import hlo`` does; returns the :class:`~mallocgame.importers.hlo.HloImport`.

    ``hlo_output``: also write the HLO text there (atomically), the file ``import hlo`` reads back.
    ``max_expanded_ops``, ``loop_state``: :func:`~mallocgame.importers.hlo.parse_hlo_text`'s.
    """
    text = compile_hlo_text(fn, arg_shapes, donate)
    where = fn if isinstance(fn, str) else getattr(fn, "__name__", "function")
    if hlo_output:
        atomic_write_text(hlo_output, text)
    default = where.rsplit(":", 1)[-1] if isinstance(fn, str) else where
    return parse_hlo_text(text, f"{where} (XLA:CPU)", name=name or default, max_expanded_ops=max_expanded_ops,
                          loop_state=loop_state)


def import_jax(fn: Callable[..., Any] | str, arg_shapes: str | Sequence[ArgShape] | None = None, **options) -> Problem:
    """The workload of a JAX function (see :func:`load_jax`)."""
    return load_jax(fn, arg_shapes, **options).problem


def _example(x, w):  # the doctest's function
    import jax.numpy as jnp

    return jnp.tanh(x @ w).sum()


__all__ = ["ArgShape", "DTYPES", "compile_hlo_text", "example_arguments", "import_jax", "load_function", "load_jax",
           "parse_arg_shapes", "parse_donate"]
