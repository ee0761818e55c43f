"""AlphaTensor-style fast matrix multiplication programs as workloads.

A factorization ``(U, V, W)`` of the n x n matrix multiplication tensor, an array of shape
``[3, n*n, R]``, is an algorithm with ``R`` multiplications::

    m_r = (sum_i U[i, r] * a_i) * (sum_j V[j, r] * b_j)        r = 0 .. R-1
    c_k = sum_r W[k, r] * m_r

**Convention** (AlphaTensor's, as in their published ``factorizations_r.npz``):
``a = vec(A)`` and ``b = vec(B)`` are row-major (``a[i*n + j] = A[i, j]``) and ``c`` is the
row-major vectorization of **C transposed** (``c[k*n + i] = C[i, k]``), i.e. the tensor is
``T[i*n + j, j*n + k, k*n + i] = 1``. A factorization that only works with ``c`` row-major
(``c[i*n + k] = C[i, k]``, the textbook layout) is accepted too: :func:`check_factorization`
tries AlphaTensor's layout first, then that one, and reports which it used. Every
factorization is checked numerically (random ``A``, ``B``; the algorithm's product must
equal ``A @ B``); a wrong shape or a wrong factorization raises :class:`InputError`.

**The program.** Applied recursively to depth ``D`` on ``N x N`` matrices,
``N = n**D * block``. The operands ``A``, ``B`` and the result ``C`` are stored as
``n**D x n**D`` grids of ``block x block`` blocks, one buffer per block (``A_i_j``
inputs, ``C_i_j`` outputs). At each level the operands are split into ``n x n``
sub-blocks and, for each ``r``:

1. ``S_r = sum_i U[i, r] A_i`` and ``T_r = sum_j V[j, r] B_j`` -- an ``add`` op writing a
   temporary buffer (skipped, the sub-block used in place, when the sum is a single
   sub-block with coefficient 1); FLOPs ``(terms - 1) * elements`` plus ``elements`` per
   coefficient other than +-1;
2. ``M_r = S_r T_r`` -- recursively; at the last level one ``matmul`` op of
   ``2 * block**3`` FLOPs; written into a temporary product buffer (or straight into the
   output sub-block when ``m_r`` feeds exactly one output with coefficient 1, first);
3. ``C_k (+)= W[k, r] M_r`` for each output sub-block it feeds -- an ``accumulate`` op
   (the first contribution initialises ``C_k``: a copy, or ``elements`` FLOPs for a
   coefficient other than 1; later ones add: ``elements`` FLOPs, ``2 * elements`` when the
   coefficient is not +-1).

Products are accumulated as soon as they are made, so each temporary lives only from its
``add`` or product to its last use. The program has exactly ``R**D`` ``matmul`` ops, and
:func:`run_program` executes it with NumPy (tests check it equals ``A @ B``).

Example:
    >>> prog = build_program(strassen(), depth=2, size=8)
    >>> sum(1 for s in prog.steps if s.kind == "matmul"), prog.n, prog.rank
    (49, 2, 7)
    >>> import numpy as np; rng = np.random.default_rng(0)
    >>> A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    >>> bool(np.allclose(run_program(prog, A, B), A @ B))
    True
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from mallocgame.importers._common import WorkloadBuilder, summarize  # noqa: F401  (summarize re-exported)
from mallocgame.model import InputError, Problem

DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8}


# --------------------------------------------------------------------------- factorizations

def strassen() -> np.ndarray:
    """Strassen's 2x2 rank-7 factorization, shape [3, 4, 7], in AlphaTensor's convention."""
    # A, B row-major: 11->0, 12->1, 21->2, 22->3.  c is vec(C^T): C11->0, C21->1, C12->2, C22->3.
    a11, a12, a21, a22 = np.eye(4, dtype=np.int64)
    u = np.stack([a11 + a22, a21 + a22, a11, a22, a11 + a12, a21 - a11, a12 - a22], axis=1)
    v = np.stack([a11 + a22, a11, a12 - a22, a21 - a11, a22, a11 + a12, a21 + a22], axis=1)
    c11, c21, c12, c22 = np.eye(4, dtype=np.int64)
    # M1..M7 contributions: C11 = M1+M4-M5+M7, C12 = M3+M5, C21 = M2+M4, C22 = M1-M2+M3+M6
    w = np.stack([c11 + c22, c21 - c22, c12 + c22, c11 + c21, c12 - c11, c22, c11], axis=1)
    return np.stack([u, v, w]).astype(np.float64)


def naive(n: int) -> np.ndarray:
    """The schoolbook algorithm as a rank-n**3 factorization (AlphaTensor's convention)."""
    if n < 1:
        raise InputError(f"naive factorization: n must be at least 1, got {n}")
    r = n ** 3
    f = np.zeros((3, n * n, r))
    t = 0
    for i in range(n):
        for j in range(n):
            for k in range(n):
                f[0, i * n + j, t] = 1
                f[1, j * n + k, t] = 1
                f[2, k * n + i, t] = 1
                t += 1
    return f


BUILTIN = {"strassen": strassen}


def load_factorization(source: str | os.PathLike) -> np.ndarray:
    """Read ``.npy`` (array [3, n*n, R]) or ``.npz`` (keys u, v, w, or one array).

    ``FILE.npz:KEY`` picks one array of a multi-array ``.npz`` (e.g. AlphaTensor's
    ``factorizations_r.npz:4,4,4``). Built-in names: ``strassen``, ``naive`` / ``naiveN``.
    """
    src = str(source)
    if src in BUILTIN:
        return BUILTIN[src]()
    if src.startswith("naive") and src[5:].isdigit():
        return naive(int(src[5:]))
    if src == "naive":
        return naive(2)
    key = None
    if not os.path.exists(src) and ".npz:" in src:
        src, key = src.split(".npz:", 1)
        src += ".npz"
    if not os.path.exists(src):
        raise InputError(f"{src}: file not found (and not a built-in factorization: strassen, naive, naiveN)")
    try:
        data = np.load(src, allow_pickle=False)
    except Exception as exc:  # numpy raises several types for bad files
        raise InputError(f"{src}: cannot read as .npy/.npz ({type(exc).__name__}: {exc})") from None
    if isinstance(data, np.ndarray):
        return _as_float(src, data)
    with data:
        keys = list(data.keys())
        if key is not None:
            if key not in keys:
                raise InputError(f"{src}: no array {key!r} (have: {', '.join(keys)})")
            return _as_float(src, data[key])
        if {"u", "v", "w"} <= set(keys):
            parts = [_as_float(f"{src}[{k}]", data[k]) for k in "uvw"]
            if len({p.shape for p in parts}) != 1 or parts[0].ndim != 2:
                raise InputError(f"{src}: u, v, w must be matrices of the same shape [n*n, R], got "
                                 + ", ".join(str(p.shape) for p in parts))
            return np.stack(parts)
        if len(keys) == 1:
            return _as_float(src, data[keys[0]])
        raise InputError(f"{src}: expected keys u, v, w or a single array, found {len(keys)} arrays "
                         f"({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}); pick one with FILE.npz:KEY")


def _as_float(where: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise InputError(f"{where}: expected a numeric array, got dtype {arr.dtype}")
    return np.asarray(arr, dtype=np.float64)


@dataclass(frozen=True)
class Factorization:
    """A checked factorization: ``u, v, w`` of shape [n*n, R] with ``w`` in AlphaTensor's layout."""

    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    n: int
    rank: int
    layout: str  # "alphatensor" (c = vec(C^T)) or "row-major" (c = vec(C)), as given


def _product_error(u, v, w, n, a, b, layout) -> float:
    m = (u.T @ a.reshape(-1)) * (v.T @ b.reshape(-1))
    c = (w @ m).reshape(n, n)
    if layout == "alphatensor":
        c = c.T
    ref = a @ b
    return float(np.max(np.abs(c - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def check_factorization(f: np.ndarray, where: str = "factorization", *, seed: int = 0,
                        tol: float = 1e-8) -> Factorization:
    """Validate shape [3, n*n, R] and correctness on random matrices; :class:`InputError` if not."""
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3 or f.shape[0] != 3:
        raise InputError(f"{where}: expected an array of shape [3, n*n, R], got shape {list(f.shape)}")
    nn, rank = f.shape[1], f.shape[2]
    n = math.isqrt(nn)
    if n * n != nn or n < 1 or rank < 1:
        raise InputError(f"{where}: expected shape [3, n*n, R] with n*n a square and R >= 1, got {list(f.shape)}")
    if not np.all(np.isfinite(f)):
        raise InputError(f"{where}: factorization has non-finite entries")
    u, v, w = f
    rng = np.random.default_rng(seed)
    errors = {}
    for layout in ("alphatensor", "row-major"):
        err = max(_product_error(u, v, w, n, rng.standard_normal((n, n)), rng.standard_normal((n, n)), layout)
                  for _ in range(3))
        errors[layout] = err
        if err <= tol:
            w_at = w if layout == "alphatensor" else _transpose_c(w, n)
            return Factorization(u, v, w_at, n, rank, layout)
    raise InputError(
        f"{where}: not a factorization of the {n}x{n} matrix multiplication tensor: on random matrices "
        f"the product is off by {errors['alphatensor']:.3g} (relative; C transposed, AlphaTensor's layout) "
        f"and {errors['row-major']:.3g} (C row-major)"
    )


def _transpose_c(w: np.ndarray, n: int) -> np.ndarray:
    """Rows of ``w`` indexed by vec(C) row-major -> indexed by vec(C^T)."""
    idx = np.array([(k % n) * n + (k // n) for k in range(n * n)])
    return w[idx]


# --------------------------------------------------------------------------- program

@dataclass(frozen=True)
class Region:
    """A square part of a buffer: rows/cols ``[r0, r0+size)`` x ``[c0, c0+size)``."""

    buf: str
    r0: int
    c0: int
    size: int


@dataclass(frozen=True)
class Mat:
    """A ``g x g`` grid of equally sized regions forming one square matrix of side ``size``."""

    tiles: tuple[tuple[Region, ...], ...]
    size: int

    @property
    def regions(self) -> list[Region]:
        return [t for row in self.tiles for t in row]

    def split(self, n: int) -> list["Mat"]:
        """Row-major list of the ``n x n`` sub-blocks."""
        g = len(self.tiles)
        s = self.size // n
        out = []
        for p in range(n):
            for q in range(n):
                if g >= n:
                    h = g // n
                    out.append(Mat(tuple(tuple(self.tiles[p * h + i][q * h + j] for j in range(h)) for i in range(h)), s))
                else:  # one region: subdivide it
                    t = self.tiles[0][0]
                    out.append(Mat(((Region(t.buf, t.r0 + p * s, t.c0 + q * s, s),),), s))
        return out


@dataclass(frozen=True)
class Step:
    """One op of the program: ``dst = sum(coef * src)`` (add), ``dst = a @ b`` (matmul) or
    ``dst (+)= coef * src`` (accumulate; ``init`` when it is the first contribution)."""

    id: str
    kind: str  # "add" | "matmul" | "accumulate"
    dst: Mat
    srcs: tuple[tuple[float, Mat], ...]
    init: bool = True


@dataclass
class Program:
    n: int
    rank: int
    depth: int
    size: int
    block: int
    layout: str
    buffers: dict[str, tuple[int, str]] = field(default_factory=dict)  # id -> (side, kind)
    steps: list[Step] = field(default_factory=list)
    A: Mat | None = None
    B: Mat | None = None
    C: Mat | None = None


def _grid(prog: Program, name: str, kind: str) -> Mat:
    g = prog.n ** prog.depth
    tiles = []
    for i in range(g):
        row = []
        for j in range(g):
            bid = f"{name}_{i}_{j}"
            prog.buffers[bid] = (prog.block, kind)
            row.append(Region(bid, 0, 0, prog.block))
        tiles.append(tuple(row))
    return Mat(tuple(tiles), prog.size)


def _temp(prog: Program, name: str, side: int) -> Mat:
    prog.buffers[name] = (side, "activation")
    return Mat(((Region(name, 0, 0, side),),), side)


def build_program(factorization: Factorization | np.ndarray, *, depth: int = 1, size: int | None = None,
                  block: int | None = None) -> Program:
    """The recursive program (see the module docstring); ``size`` = N, or give ``block``."""
    fz = factorization if isinstance(factorization, Factorization) else check_factorization(factorization)
    if depth < 1:
        raise InputError(f"matmul: depth must be at least 1, got {depth}")
    g = fz.n ** depth
    if size is None:
        block = 256 if block is None else block
        size = g * block
    elif block is not None and block * g != size:
        raise InputError(f"matmul: size {size} != n**depth ({g}) x block ({block})")
    if size < g or size % g:
        raise InputError(f"matmul: matrix size {size} must be a positive multiple of n**depth = {g}")
    block = size // g
    prog = Program(fz.n, fz.rank, depth, size, block, fz.layout)
    prog.A, prog.B, prog.C = _grid(prog, "A", "input"), _grid(prog, "B", "input"), _grid(prog, "C", "output")
    _mul(prog, fz, prog.A, prog.B, prog.C, 0, "")
    return prog


def _combo(prog: Program, parts: list[Mat], coefs: np.ndarray, name: str) -> Mat:
    terms = [(float(c), m) for c, m in zip(coefs, parts) if c != 0]
    if not terms:
        raise InputError(f"matmul: factor {name} has an all-zero column")
    if len(terms) == 1 and terms[0][0] == 1.0:
        return terms[0][1]
    dst = _temp(prog, name, terms[0][1].size)
    prog.steps.append(Step(f"add:{name}", "add", dst, tuple(terms)))
    return dst


def _mul(prog: Program, fz: Factorization, A: Mat, B: Mat, out: Mat, level: int, path: str) -> None:
    if level == prog.depth:
        prog.steps.append(Step(f"matmul:{path}", "matmul", out, ((1.0, A), (1.0, B))))
        return
    n = fz.n
    As, Bs, Cs = A.split(n), B.split(n), out.split(n)
    started = [False] * (n * n)
    for r in range(fz.rank):
        p = f"{path}.{r}" if path else f"{r}"
        S = _combo(prog, As, fz.u[:, r], f"S{p}")
        T = _combo(prog, Bs, fz.v[:, r], f"T{p}")
        targets = [(k, float(fz.w[k, r])) for k in range(n * n) if fz.w[k, r] != 0]
        # w is indexed by vec(C^T): k = col * n + row  ->  sub-block (row, col) of out
        blocks = [(Cs[(k % n) * n + k // n], k, c) for k, c in targets]
        if len(blocks) == 1 and blocks[0][2] == 1.0 and not started[blocks[0][1]]:
            _mul(prog, fz, S, T, blocks[0][0], level + 1, p)
            started[blocks[0][1]] = True
            continue
        M = _temp(prog, f"M{p}", S.size)
        _mul(prog, fz, S, T, M, level + 1, p)
        for dst, k, c in blocks:
            prog.steps.append(Step(f"acc:{p}>{k}", "accumulate", dst, ((c, M),), init=not started[k]))
            started[k] = True
    if not all(started):
        raise InputError("matmul: factorization leaves an output block unwritten")


# --------------------------------------------------------------------------- execution

def run_program(prog: Program, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Execute the program with NumPy (float64) and return ``C``; used to check correctness."""
    mem = {bid: np.zeros((side, side)) for bid, (side, _kind) in prog.buffers.items()}

    def read(m: Mat) -> np.ndarray:
        g = len(m.tiles)
        return np.block([[mem[t.buf][t.r0:t.r0 + t.size, t.c0:t.c0 + t.size] for t in row] for row in m.tiles]) \
            if g > 1 else mem[m.tiles[0][0].buf][m.tiles[0][0].r0:m.tiles[0][0].r0 + m.size,
                                                  m.tiles[0][0].c0:m.tiles[0][0].c0 + m.size]

    def write(m: Mat, x: np.ndarray) -> None:
        h = m.size // len(m.tiles)
        for i, row in enumerate(m.tiles):
            for j, t in enumerate(row):
                mem[t.buf][t.r0:t.r0 + t.size, t.c0:t.c0 + t.size] = x[i * h:(i + 1) * h, j * h:(j + 1) * h]

    write(prog.A, np.asarray(A, dtype=np.float64))
    write(prog.B, np.asarray(B, dtype=np.float64))
    for s in prog.steps:
        if s.kind == "add":
            write(s.dst, sum(c * read(m) for c, m in s.srcs))
        elif s.kind == "matmul":
            write(s.dst, read(s.srcs[0][1]) @ read(s.srcs[1][1]))
        else:
            c, m = s.srcs[0]
            write(s.dst, c * read(m) if s.init else read(s.dst) + c * read(m))
    return read(prog.C)


# --------------------------------------------------------------------------- workload

def program_problem(prog: Program, *, dtype: str = "f32", name: str | None = None, source: str = "") -> Problem:
    """The program as a workload (one op per step, one buffer per block/temporary)."""
    if dtype not in DTYPE_BYTES:
        raise InputError(f"matmul: unknown dtype {dtype!r} (one of {', '.join(DTYPE_BYTES)})")
    item = DTYPE_BYTES[dtype]
    name = name or f"matmul_n{prog.n}_r{prog.rank}_d{prog.depth}_N{prog.size}"
    b = WorkloadBuilder(name, source=source)
    for bid, (side, kind) in prog.buffers.items():
        b.add_buffer(bid, side * side * item, kind)

    def touches(m: Mat) -> list[tuple[str, int]]:
        return [(t.buf, t.size * t.size * item) for t in m.regions]

    for s in prog.steps:
        elems = s.dst.size ** 2
        if s.kind == "add":
            flops = (len(s.srcs) - 1) * elems + sum(elems for c, _ in s.srcs if abs(c) != 1.0)
            reads = [x for _, m in s.srcs for x in touches(m)]
        elif s.kind == "matmul":
            flops = 2.0 * s.dst.size ** 3
            reads = touches(s.srcs[0][1]) + touches(s.srcs[1][1])
        else:
            c, m = s.srcs[0]
            if s.init:
                flops = 0 if c == 1.0 else elems
                reads = touches(m)
            else:
                flops = elems if abs(c) == 1.0 else 2 * elems
                reads = touches(m) + touches(s.dst)
        b.add_op(s.id, s.kind, flops, reads=reads, writes=touches(s.dst))
    return b.build()


def import_matmul(factorization: str | os.PathLike | np.ndarray | None = None, *, depth: int = 1,
                  size: int | None = None, block: int | None = None, dtype: str = "f32",
                  name: str | None = None) -> Problem:
    """Workload of the recursive program of ``factorization`` (default Strassen).

    ``size`` is the matrix size N (default ``n**depth * 256``), or give the ``block`` side.
    """
    where = "strassen" if factorization is None else (
        "factorization" if isinstance(factorization, np.ndarray) else str(factorization))
    raw = strassen() if factorization is None else (
        factorization if isinstance(factorization, np.ndarray) else load_factorization(factorization))
    fz = check_factorization(raw, where)
    prog = build_program(fz, depth=depth, size=size, block=block)
    return program_problem(prog, dtype=dtype, name=name, source=where)


__all__ = ["Factorization", "Program", "build_program", "check_factorization", "import_matmul",
           "load_factorization", "naive", "program_problem", "run_program", "strassen", "summarize"]
