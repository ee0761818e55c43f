"""PyTorch importer: ``torch.export`` of an ``nn.Module`` -> workload.

``torch`` is imported inside the functions that need it, never at module import, so the
rest of mallocgame (and ``mallocgame import hlo``) does not pay for it.

``SPEC`` is ``package.module:callable`` or ``path/to/file.py:callable`` (returning the module,
or the module and example inputs); the module is exported in ``eval()`` mode with static shapes.
One op per ATen node in graph order (the schedule), one buffer per tensor produced plus the
parameters and inputs, views aliasing their base, the importers' lifetimes (weights for the
whole program, per use, or left out), FLOPs by ``torch.utils.flop_counter``'s conventions. The
rules: docs/guide/importing.md, "The torch importer in detail".

Example (needs torch):
    >>> import torch                                        # doctest: +SKIP
    >>> p = import_module(torch.nn.Linear(8, 4), [(2, 8)])  # doctest: +SKIP
    >>> [op.kind for op in p.ops], p.ops[0].flops           # doctest: +SKIP
    (['linear'], 128.0)
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

from mallocgame.importers._common import WorkloadBuilder, buffer_leaves, resolve_callable, summarize  # noqa: F401  (summarize re-exported)
from mallocgame.problem.model import InputError, Problem

WEIGHT_MODES = ("use", "program", "none")


class TorchImportWarning(UserWarning):
    """An ATen op without a FLOP formula (counted as 0 FLOPs)."""


# --------------------------------------------------------------------------- spec loading

def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,32,32"`` (or ``1x3x32x32``) -> ``(1, 3, 32, 32)``."""
    parts = [p for p in text.replace("x", ",").replace(" ", "").strip("()[]").split(",") if p]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise InputError(f"--input-shape {text!r}: expected comma-separated integers like 1,3,32,32") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputError(f"--input-shape {text!r}: dimensions must be positive integers")
    if math.prod(dims) * 4 > MAX_EXAMPLE_BYTES:
        raise InputError(f"--input-shape {text!r}: a float32 input of that shape is more than 2**62 bytes")
    return dims


MAX_EXAMPLE_BYTES = 2**62  # an example input's bytes (int64 downstream), as every importer's sizes


def _example_inputs(shapes: Sequence[Sequence[int]]) -> list[Any]:
    """Random float32 example inputs (seed 0); one that cannot be allocated is one line, not a crash.

    Their total is checked against the machine's memory first (torch would try and fail, or swap).
    """
    import torch  # lazy

    total = sum(math.prod(s) * 4 for s in shapes)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    shown = " ".join("--input-shape " + ",".join(map(str, s)) for s in shapes)
    if memory and total > memory:
        raise InputError(f"{shown}: the example inputs need {total} bytes of float32, more than this machine's "
                         f"{memory} bytes of memory")
    gen = torch.Generator().manual_seed(0)
    try:
        return [torch.randn(tuple(s), generator=gen) for s in shapes]
    except (RuntimeError, MemoryError, TypeError, OverflowError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(f"{shown}: cannot make the example inputs ({type(exc).__name__}: {first[:200]})") from None


def load_spec(spec: str) -> Any:
    """Resolve ``module.path:callable`` or ``file.py:callable`` to the callable's result."""
    obj = resolve_callable(spec)
    attr = spec.rsplit(":", 1)[1]
    try:
        return obj()
    except Exception as exc:
        raise InputError(f"{spec}: calling {attr}() failed ({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------- FLOPs

_ELEMENTWISE = {
    "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "neg", "abs",
    "relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "rsqrt", "pow", "square", "reciprocal", "sin", "cos", "tan", "erf", "erfc", "clamp", "clamp_min",
    "clamp_max", "clip", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "elu", "selu", "celu", "mish",
    "softplus", "softsign", "logsigmoid", "glu", "prelu", "where", "maximum", "minimum", "fmax", "fmin",
    "masked_fill", "eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "logical_not", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "floor", "ceil", "round", "trunc", "sign",
    "isnan", "isinf", "isfinite", "nan_to_num", "lerp", "addcmul", "addcdiv", "dropout", "native_dropout",
    "_to_copy", "to", "type_as", "threshold", "hardshrink", "softshrink", "tanhshrink", "sgn", "frac",
    "atan2", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "xlogy", "heaviside",
}
# element-wise functions XLA's cost analysis counts as transcendentals (one per element), apart from FLOPs
_TRANSCENDENTAL = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "pow", "sin", "cos", "tan", "erf",
    "erfc", "tanh", "sigmoid", "atan2", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh",
}
_REDUCTION = {
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var", "std", "var_mean",
    "std_mean", "norm", "linalg_vector_norm", "logsumexp", "cumsum", "cumprod", "all", "any", "count_nonzero",
    "nansum", "nanmean", "median", "mode", "aminmax",
}
_PER_ELEMENT = {"softmax": 5, "_softmax": 5, "log_softmax": 5, "_log_softmax": 5, "layer_norm": 7,
                "native_layer_norm": 7, "group_norm": 7, "native_group_norm": 7, "batch_norm": 4,
                "_native_batch_norm_legit_no_training": 4, "_native_batch_norm_legit": 4,
                "native_batch_norm": 4, "instance_norm": 7, "rms_norm": 4}
_POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
         "max_pool2d_with_indices", "max_pool3d_with_indices"}
_ADAPTIVE_POOL = {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
                  "adaptive_max_pool2d", "adaptive_max_pool1d"}
_NO_FLOPS = {
    "cat", "concat", "stack", "clone", "copy", "copy_", "contiguous", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "empty", "empty_like", "new_zeros", "new_ones", "new_full", "new_empty", "arange",
    "embedding", "index", "index_select", "gather", "scatter", "index_put", "constant_pad_nd", "pad", "flip",
    "roll", "repeat", "tile", "masked_select", "scalar_tensor", "lift_fresh_copy", "_assert_tensor_metadata",
    "tril", "triu", "one_hot", "nonzero", "sort", "topk", "upsample_nearest2d", "_unsafe_index", "linspace",
    "rand", "randn", "rand_like", "randn_like", "bernoulli", "slice_scatter", "select_scatter", "diagonal",
    "repeat_interleave", "alias_copy", "view_copy", "fill", "zero", "detach_", "_assert_async",
    "sym_constrain_range_for_size", "_assert_scalar", "item", "_local_scalar_dense", "resize_",
    "upsample_nearest1d", "upsample_nearest3d", "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
}
# recurrent layers at the high level: each step multiplies every weight matrix by a vector and adds every bias
_RNN = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
# interpolation: FLOPs per output element (nearest is data movement: _NO_FLOPS); a linear one in d dimensions is
# 2^d - 1 lerps of 3 FLOPs each, a bicubic one 16 taps of a multiply-add
_INTERPOLATE = {"upsample_linear1d": 3, "upsample_bilinear2d": 9, "_upsample_bilinear2d_aa": 9,
                "upsample_trilinear3d": 21, "upsample_bicubic2d": 32, "_upsample_bicubic2d_aa": 32}
# Fourier transforms as XLA's cost analysis counts an fft: 2 x 4 x log2(transform length) per input element
_FFT_CORE = {"_fft_r2c", "_fft_c2r", "_fft_c2c"}           # (self, dim: list, normalization, ...)
_FFT_1D = {"fft_fft", "fft_ifft", "fft_rfft", "fft_irfft", "fft_hfft", "fft_ihfft"}  # (self, n, dim, norm)
_MATMUL = {"mm", "matmul", "bmm", "linear", "addmm", "baddbmm", "addbmm", "einsum", "_addmm_activation", "mv",
           "dot", "vdot", "outer", "addmv", "addr"}
_CONV = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "cudnn_convolution", "mkldnn_convolution"}


def _numel(shape: Sequence[int]) -> int:
    return int(math.prod(int(d) for d in shape))


def _tensor_shapes(args: Sequence[Any]) -> list[tuple[int, ...] | None]:
    out = []
    for a in args:
        v = getattr(a, "meta", {}).get("val") if hasattr(a, "meta") else None
        out.append(tuple(int(d) for d in v.shape) if hasattr(v, "shape") else None)
    return out


_ATTENTION = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu")
_DROPOUT = ("dropout", "native_dropout", "feature_dropout", "alpha_dropout")


def op_flops(name: str, node: Any, out_shapes: list[tuple[int, ...]]) -> float | None:
    """FLOPs of one ATen node, or ``None`` if there is no formula for it."""
    args = list(node.args)
    shapes = _tensor_shapes(args)
    out = out_shapes[0] if out_shapes else ()
    out_n = _numel(out) if out_shapes else 0
    if name in _MATMUL:
        return _matmul_flops(name, args, shapes, out_n)
    if name in _CONV:
        return _conv_flops(name, args, shapes, out_n)
    if name in _ATTENTION:
        return _attention_flops(shapes)
    if name in _RNN:
        return _rnn_flops(args, shapes)
    if name in _INTERPOLATE:
        return float(_INTERPOLATE[name] * out_n)
    if name in _FFT_CORE or name in _FFT_1D:
        return _fft_flops(name, args, shapes, out)
    if name in _DROPOUT and len(args) > 2 and args[2] is False:
        return 0.0  # identity outside training
    if name in _ELEMENTWISE:
        return float(out_n)
    if name in _REDUCTION or name in _ADAPTIVE_POOL:
        src = shapes[0]
        return float(_numel(src)) if src is not None else float(out_n)
    if name in _PER_ELEMENT:
        src = shapes[0]
        return float(_PER_ELEMENT[name] * (_numel(src) if src is not None else out_n))
    if name in _POOL:
        return _pool_flops(name, args, out_n)
    if name in _NO_FLOPS:
        return 0.0
    return None


def _matmul_flops(name: str, args: list, shapes: list, out_n: int) -> float | None:
    if name == "einsum":
        return _einsum_flops(args[0], _tensor_shapes(args[1]) if len(args) > 1 else [])
    if name in ("outer", "addr"):
        return float(out_n) * (1 if name == "outer" else 2)
    a, b = (shapes[1], shapes[2]) if name in ("addmm", "baddbmm", "addbmm", "addmv", "_addmm_activation") \
        else (shapes[0], shapes[1])
    if a is None or b is None:
        return None
    if name == "linear":      # x [..., in] @ w[out, in]^T
        return 2.0 * _numel(a[:-1]) * a[-1] * b[0]
    if name == "addbmm":      # sum over the batch of [n, k] @ [k, m]
        return 2.0 * a[0] * a[1] * a[2] * b[-1]
    return 2.0 * out_n * a[-1]


def _conv_flops(name: str, args: list, shapes: list, out_n: int) -> float | None:
    x, w = shapes[0], shapes[1]
    if x is None or w is None:
        return None
    transposed = name.startswith("conv_transpose") or (
        name in ("convolution", "_convolution") and len(args) > 6 and bool(args[6]))
    kernel = _numel(w[2:])
    if transposed:  # weight [in, out / groups, k...]: each input element feeds out/groups * kernel outputs
        return 2.0 * _numel(x) * w[1] * kernel
    return 2.0 * out_n * w[1] * kernel  # weight [out, in / groups, k...]


def _attention_flops(shapes: list) -> float | None:
    q, k, v = shapes[0], shapes[1], shapes[2]
    if q is None or k is None or v is None:
        return None
    batch = _numel(q[:-2])
    return 2.0 * batch * q[-2] * k[-2] * q[-1] + 2.0 * batch * q[-2] * k[-2] * v[-1]


def _rnn_flops(args: list, shapes: list) -> float | None:
    params = _tensor_shapes(args[2]) if len(args) > 2 and isinstance(args[2], (list, tuple)) else []
    x = shapes[0]
    if x is None or not any(p is not None and len(p) == 2 for p in params):
        return None
    steps = _numel(x[:-1])  # batch x time (time alone for an unbatched input)
    return steps * sum((2.0 if len(p) == 2 else 1.0) * _numel(p) for p in params if p is not None)


def _fft_flops(name: str, args: list, shapes: list, out: tuple[int, ...]) -> float | None:
    x = shapes[0]
    if x is None or not x:
        return None
    if name in _FFT_CORE:
        dims = list(args[1]) if len(args) > 1 and isinstance(args[1], (list, tuple)) else [-1]
        # c2r's input is the half spectrum: the transform's length is its output's
        lengths = [(out if name == "_fft_c2r" else x)[d] for d in dims]
    else:
        dim = args[2] if len(args) > 2 and isinstance(args[2], int) else -1
        n = args[1] if len(args) > 1 and isinstance(args[1], int) else None
        lengths = [n if n is not None else (out if name in ("fft_irfft", "fft_hfft") else x)[dim]]
    logs = math.prod(math.log2(n) for n in lengths if n > 1) if any(n > 1 for n in lengths) else 0.0
    return 8.0 * logs * _numel(x)


def _pool_flops(name: str, args: list, out_n: int) -> float:
    kernel = args[1] if len(args) > 1 else 1
    kernel = [kernel] if isinstance(kernel, int) else list(kernel)
    dims = {"1d": 1, "2d": 2, "3d": 3}[name[name.index("pool") + 4:name.index("pool") + 6]]
    if len(kernel) == 1:
        kernel = kernel * dims
    return float(out_n * _numel(kernel))


def _einsum_flops(equation: Any, shapes: list) -> float | None:
    if not isinstance(equation, str) or "->" not in equation:
        return None
    lhs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(lhs, shapes):
        if shape is None or "." in term:
            return None
        for c, d in zip(term, shape):
            sizes[c] = int(d)
    return 2.0 * _numel(sizes.values())


# --------------------------------------------------------------------------- import

def _val_leaves(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out.extend(_val_leaves(x))
        return out
    return [v] if hasattr(v, "shape") and hasattr(v, "dtype") else []


def _nbytes(t: Any) -> int:
    return _numel(t.shape) * t.element_size()


@contextlib.contextmanager
def _quiet_torch_logs():
    """Silence torch's loggers while exporting: a failing export logs a 20-line traceback
    (``fake_tensor.py ... failed while attempting to run meta``) before raising; the raise
    becomes one line of its own."""
    logger = logging.getLogger("torch")
    old_level, old_propagate = logger.level, logger.propagate
    handlers = logger.handlers[:]
    for h in handlers:
        logger.removeHandler(h)
    logger.setLevel(logging.CRITICAL + 1)
    logger.propagate = False
    try:
        yield
    finally:
        for h in handlers:
            logger.addHandler(h)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def export_module(module: Any, example_inputs: Sequence[Any], *, level: str = "high") -> Any:
    """``torch.export.export(module.eval(), example_inputs)`` (optionally core-ATen decomposed)."""
    import torch  # lazy
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if level not in ("high", "core"):
        raise InputError(f"level must be 'high' or 'core', got {level!r}")
    module = module.eval()
    try:
        with torch.no_grad(), _quiet_torch_logs():
            ep = torch.export.export(module, tuple(example_inputs))
            if level == "core":
                ep = ep.run_decompositions()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"torch.export failed ({type(exc).__name__}: {first[:300]})") from None
    return ep


def import_exported(ep: Any, *, weights: str = "program", name: str = "torch", source: str = "") -> Problem:
    """Workload of an ``ExportedProgram`` (see the module docstring)."""
    if weights not in WEIGHT_MODES:
        raise InputError(f"--weights must be one of {', '.join(WEIGHT_MODES)}, got {weights!r}")
    kinds, targets = _placeholder_roles(ep.graph_signature)
    walk = _GraphWalk(WorkloadBuilder(name, source=source), weights, kinds, targets, source or name)
    for node in ep.graph.nodes:
        walk.visit(node)
    return walk.b.build(tight=walk.weight_ids if weights == "use" else ())


def _placeholder_roles(sig: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Per placeholder name: ``"input"`` (a user input) or ``"weight"``, and the parameter or buffer it holds."""
    from torch.export.graph_signature import InputKind

    kinds = {}
    targets = {}
    for spec in sig.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if arg_name is None:
            continue
        kinds[arg_name] = "input" if spec.kind == InputKind.USER_INPUT else "weight"
        if spec.target:
            targets[arg_name] = spec.target
    return kinds, targets


def _arg_nodes(a: Any) -> list[Any]:
    """The graph nodes in an argument (nested lists, tuples and dicts), in order."""
    import torch  # lazy
    if isinstance(a, torch.fx.Node):
        return [a]
    if isinstance(a, (list, tuple)):
        out = []
        for x in a:
            out.extend(_arg_nodes(x))
        return out
    if isinstance(a, dict):
        return _arg_nodes(list(a.values()))
    return []


@dataclass(frozen=True)
class _GraphWalk:
    """The exported graph's nodes, in order, recorded into a :class:`WorkloadBuilder`."""

    b: WorkloadBuilder
    weights: str  # one of WEIGHT_MODES
    kinds: dict[str, str]  # placeholder name -> "input" | "weight"
    targets: dict[str, str]  # placeholder name -> the parameter or buffer it holds
    where: str  # the source (or name) the warnings name
    env: dict[str, Any] = field(default_factory=dict)  # node name -> value: buffer id, None, or list of values
    view_bytes: dict[str, int] = field(default_factory=dict)  # node name -> bytes of the view (reads through views)
    weight_ids: set[str] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)  # ops already warned about (no FLOP formula)

    def visit(self, node: Any) -> None:
        """Record one node: a placeholder, a constant, the output or an ATen call."""
        if node.op == "placeholder":
            self.placeholder(node)
        elif node.op == "get_attr":
            self.env[node.name] = None if self.weights == "none" else \
                self.new_buffers(str(node.target), node.meta.get("val"), "weight")
            self.weight_ids.update(buffer_leaves(self.env[node.name]))
        elif node.op == "output":
            for src in _arg_nodes(node.args):
                for buf in buffer_leaves(self.env.get(src.name)):
                    if self.b.kinds.get(buf) == "activation":
                        self.b.set_kind(buf, "output")
        elif node.op == "call_function":
            self.call(node)

    def new_buffers(self, base: str, val: Any, kind: str) -> Any:
        """A buffer per tensor of ``val`` (nested as ``val`` is); ``None`` for no tensor or no bytes."""
        if isinstance(val, (list, tuple)):
            return [self.new_buffers(f"{base}#{i}", x, kind) for i, x in enumerate(val)]
        if not (hasattr(val, "shape") and hasattr(val, "dtype")):
            return None
        size = _nbytes(val)
        return self.b.add_buffer(base, size, kind) if size > 0 else None

    def placeholder(self, node: Any) -> None:
        """A user input or a weight (left out with ``weights="none"``)."""
        kind = self.kinds.get(node.name, "input")
        if kind == "weight" and self.weights == "none":
            self.env[node.name] = None
            return
        ident = (self.targets.get(node.name) or node.name).replace(",", "_").replace(" ", "_")
        self.env[node.name] = self.new_buffers(ident, node.meta.get("val"), kind)
        if kind == "weight":
            self.weight_ids.update(buffer_leaves(self.env[node.name]))

    def call(self, node: Any) -> None:
        """An ATen call: ``getitem`` and views alias what they read, any other op is recorded."""
        val = node.meta.get("val")
        target = node.target
        if target.__class__.__name__ == "builtin_function_or_method" and getattr(target, "__name__", "") == "getitem":
            base = self.env.get(node.args[0].name)
            idx = node.args[1]
            self.env[node.name] = base[idx] if isinstance(base, list) and isinstance(idx, int) and idx < len(base) \
                else None
            if hasattr(val, "shape"):
                self.view_bytes[node.name] = _nbytes(val)
            return
        schema = getattr(target, "_schema", None)
        inputs = _arg_nodes(list(node.args) + list(node.kwargs.values()))
        if schema is None and not _val_leaves(val):
            return  # symbolic-int arithmetic and the like: no tensors
        alias = None
        if schema is not None and schema.returns and schema.returns[0].alias_info is not None:
            alias = schema.returns[0].alias_info
        if alias is not None and not alias.is_write and inputs:
            # a view: aliases the schema argument that shares its alias set (first tensor input)
            base_node = _aliased_input(schema, node, alias) or inputs[0]
            base = self.env.get(base_node.name)
            self.env[node.name] = [base] * len(val) if isinstance(val, (list, tuple)) and isinstance(base, str) \
                else base
            if hasattr(val, "shape"):
                self.view_bytes[node.name] = _nbytes(val)
            return
        self.op(node, inputs, schema, alias)

    def op(self, node: Any, inputs: list[Any], schema: Any, alias: Any) -> None:
        """An op that computes: its reads, its writes (new buffers, or the input it updates in place), its FLOPs."""
        val = node.meta.get("val")
        packet = getattr(node.target, "_overloadpacket", None)
        opname = getattr(packet, "__name__", None) or getattr(node.target, "__name__", str(node.target))
        opname = opname.split(".")[-1]
        reads = []
        for src in inputs:
            for buf in buffer_leaves(self.env.get(src.name)):
                nbytes = self.b.sizes[buf]
                if src.name in self.view_bytes:
                    nbytes = min(nbytes, self.view_bytes[src.name])
                reads.append((buf, nbytes))
        if alias is not None and alias.is_write:  # in-place: writes the aliased input
            base_node = _aliased_input(schema, node, alias) or inputs[0]
            out = self.env.get(base_node.name)
        else:
            out = self.new_buffers(node.name, val, "activation")
        writes = [(buf, self.b.sizes[buf]) for buf in buffer_leaves(out)]
        flops, trans = self.flops(opname, node, [tuple(int(d) for d in t.shape) for t in _val_leaves(val)])
        inplace = []
        if opname in _ELEMENTWISE and writes:
            inplace = [(src, dst) for dst, _ in writes for src, _n in reads
                       if src not in self.weight_ids and self.b.sizes[src] == self.b.sizes[dst]]
        self.b.add_op(node.name, opname, flops, reads=reads, writes=writes, inplace=inplace, transcendentals=trans)
        self.env[node.name] = out

    def flops(self, opname: str, node: Any, shapes: list) -> tuple[float, float]:
        """The op's FLOPs and transcendentals; an op without a formula is 0 FLOPs, warned about once. An in-place
        variant (``add_``, ``relu_``, ``sigmoid_``) costs what its functional op does."""
        if opname.endswith("_") and not opname.endswith("__") and op_flops(opname, node, shapes) is None:
            opname = opname[:-1]
        flops = op_flops(opname, node, shapes)
        if flops is None:
            if opname not in self.warned:
                self.warned.add(opname)
                # stacklevel: the caller of import_exported, as before (flops <- op <- call <- visit <- import_exported)
                warnings.warn(f"{self.where}: no FLOP formula for aten.{opname}; counted as 0 FLOPs",
                              TorchImportWarning, stacklevel=6)
            flops = 0.0
        trans = 0.0
        if opname in _TRANSCENDENTAL:  # counted apart from FLOPs, as XLA's cost analysis does
            flops, trans = 0.0, flops
        return flops, trans


def _aliased_input(schema: Any, node: Any, alias: Any) -> Any:
    """The input node whose schema argument shares the return's alias set."""
    import torch  # lazy
    sets = set(alias.before_set)
    for k, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and set(arg.alias_info.before_set) & sets:
            value = node.args[k] if k < len(node.args) else node.kwargs.get(arg.name)
            if isinstance(value, torch.fx.Node):
                return value
    return None


def import_module(module: Any, input_shapes: Sequence[Sequence[int]] = (), *, example_inputs: Sequence[Any] | None = None,
                  weights: str = "program", level: str = "high", name: str | None = None, source: str = "") -> Problem:
    """Workload of an in-memory ``nn.Module`` (shapes give float32 random example inputs)."""
    if input_shapes:
        example_inputs = _example_inputs(input_shapes)
    if not example_inputs:
        raise InputError(f"{source or 'module'}: no example inputs: give --input-shape (e.g. --input-shape 1,3,32,32)")
    if weights not in WEIGHT_MODES:
        raise InputError(f"--weights must be one of {', '.join(WEIGHT_MODES)}, got {weights!r}")
    ep = export_module(module, example_inputs, level=level)
    return import_exported(ep, weights=weights, name=name or type(module).__name__, source=source)


def import_torch(spec: str | Any, input_shapes: Sequence[str | Sequence[int]] = (), *, weights: str = "program",
                 level: str = "high", name: str | None = None) -> Problem:
    """Workload of ``spec`` (``module:callable`` / ``file.py:callable``, or a module object)."""
    import torch  # lazy
    shapes = [parse_shape(s) if isinstance(s, str) else tuple(int(d) for d in s) for s in input_shapes]
    if isinstance(spec, str):
        obj = load_spec(spec)
        source = spec
    else:
        obj, source = spec, type(spec).__name__
    example = None
    if isinstance(obj, tuple) and len(obj) == 2:
        obj, example = obj
        if isinstance(example, torch.Tensor):
            example = (example,)
    if not isinstance(obj, torch.nn.Module):
        raise InputError(f"{source}: the callable must return an nn.Module or (module, example_inputs), "
                         f"got {type(obj).__name__}")
    default_name = spec.rsplit(":", 1)[-1] if isinstance(spec, str) else type(obj).__name__
    return import_module(obj, shapes, example_inputs=example, weights=weights, level=level,
                         name=name or default_name, source=source)


__all__ = ["TorchImportWarning", "WEIGHT_MODES", "export_module", "import_exported", "import_module",
           "import_torch", "load_spec", "op_flops", "parse_shape", "summarize"]
