"""AlphaTensor-style fast matrix multiplication programs as workloads.

A factorization ``(U, V, W)`` of the ``<n, m, p>`` matrix multiplication tensor (square as one
``[3, n*n, R]`` array, or rectangular as three matrices) is checked numerically in AlphaTensor's
layout (or the textbook one) and applied recursively to depth ``D`` over square blocks: one
buffer per block, an ``add`` op per operand sum, a ``matmul`` op per leaf product (``R**D`` of
them), an ``accumulate`` op per contribution, each temporary live from its op to its last use.
The layout convention and the program op by op: docs/guide/importing.md, "The matmul importer
in detail".

Example:
    >>> prog = build_program(strassen(), depth=2, size=8)
    >>> sum(1 for s in prog.steps if s.kind == "matmul"), prog.n, prog.rank
    (49, 2, 7)
    >>> import numpy as np; rng = np.random.default_rng(0)
    >>> A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    >>> bool(np.allclose(run_program(prog, A, B), A @ B))
    True
    >>> fz = check_factorization(naive(2, 1, 3)); fz.shape, fz.rank   # a 2x1 times 1x3 product
    ((2, 1, 3), 6)
    >>> prog = build_program(fz, size=4); A, B = rng.standard_normal((4, 2)), rng.standard_normal((2, 6))
    >>> bool(np.allclose(run_program(prog, A, B), A @ B))
    True
"""

from __future__ import annotations

import math
import os
import pickle
import zipfile
from dataclasses import dataclass, field

import numpy as np

from mallocgame.formats.io import check_regular_file, check_zip_expansion
from mallocgame.importers._common import WorkloadBuilder, summarize  # noqa: F401  (summarize re-exported)
from mallocgame.problem.model import InputError, Problem

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


def naive(n: int, m: int | None = None, p: int | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
    """The schoolbook algorithm as a rank-``n*m*p`` factorization (AlphaTensor's convention).

    ``naive(n)`` is the square one, an array ``[3, n*n, n**3]``; with ``m`` and ``p`` the
    ``<n, m, p>`` one, a tuple ``(u, v, w)``.
    """
    square = m is None and p is None
    m = n if m is None else m
    p = n if p is None else p
    if min(n, m, p) < 1:
        raise InputError(f"naive factorization: n, m, p must be at least 1, got {n}, {m}, {p}")
    r = n * m * p
    u, v, w = np.zeros((n * m, r)), np.zeros((m * p, r)), np.zeros((p * n, r))
    t = 0
    for i in range(n):
        for j in range(m):
            for k in range(p):
                u[i * m + j, t] = 1
                v[j * p + k, t] = 1
                w[k * n + i, t] = 1
                t += 1
    return np.stack([u, v, w]) if square else (u, v, w)


BUILTIN = {"strassen": strassen}


def load_factorization(source: str | os.PathLike) -> np.ndarray | tuple[np.ndarray, ...]:
    """Read ``.npy`` (array [3, n*n, R]) or ``.npz`` (keys u, v, w, or one array).

    ``FILE.npz:KEY`` picks one entry of a multi-array ``.npz``, e.g. AlphaTensor's
    ``factorizations_r.npz:4,4,5`` (a rectangular entry is a tuple ``(u, v, w)`` stored as
    an object array; it is read with an unpickler that builds numpy arrays and nothing else).
    Built-in names: ``strassen``, ``naive`` / ``naiveN``.
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
    check_regular_file(src)  # a FIFO would block np.load
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
                raise InputError(f"{src}: no array {key!r} (have: {', '.join(keys[:8])}{', ...' if len(keys) > 8 else ''})")
            return _npz_entry(src, data, key)
        if {"u", "v", "w"} <= set(keys):
            _check_expanded_size(src, data, "u", "v", "w")
            return tuple(_as_float(f"{src}[{k}]", data[k]) for k in "uvw")
        if len(keys) == 1:
            return _npz_entry(src, data, keys[0])
        raise InputError(f"{src}: expected keys u, v, w or a single array, found {len(keys)} arrays "
                         f"({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}); pick one with FILE.npz:KEY")


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays (an object array of arrays, as ``np.save`` writes a tuple) and refuses anything else."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"),
               ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _check_expanded_size(src: str, data, *keys: str) -> None:
    """One line when the ``.npz`` entries ``keys`` together expand past the cap on a compressed input
    (:func:`mallocgame.formats.io.check_zip_expansion`)."""
    check_zip_expansion(src if len(keys) > 1 else f"{src}:{keys[0]}", data.zip, [f"{key}.npy" for key in keys])


def _npz_entry(src: str, data, key: str) -> np.ndarray | tuple[np.ndarray, ...]:
    """One entry of an ``.npz``: a numeric array, or a tuple of arrays stored as an object array."""
    where = f"{src}:{key}"
    _check_expanded_size(src, data, key)
    try:
        return _as_float(where, data[key])
    except ValueError as exc:
        if "allow_pickle" not in str(exc):
            raise InputError(f"{where}: cannot read ({exc})") from None
    try:
        with zipfile.ZipFile(src) as zf, zf.open(f"{key}.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            read_header(fh)
            obj = _ArraysOnly(fh).load()
    except (OSError, KeyError, ValueError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise InputError(f"{where}: cannot read ({type(exc).__name__}: {exc})") from None
    parts = list(obj) if isinstance(obj, (np.ndarray, list, tuple)) else []
    if len(parts) != 3 or not all(isinstance(x, np.ndarray) for x in parts):
        raise InputError(f"{where}: expected a numeric array or a tuple (u, v, w) of arrays")
    return tuple(_as_float(f"{where}[{k}]", x) for k, x in zip("uvw", parts))


def _as_float(where: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise InputError(f"{where}: expected a numeric array, got dtype {arr.dtype}")
    return np.asarray(arr, dtype=np.float64)


@dataclass(frozen=True)
class Factorization:
    """A checked factorization of ``<n, m, p>``: ``u [n*m, R]``, ``v [m*p, R]``, ``w [p*n, R]`` (AlphaTensor's layout)."""

    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    shape: tuple[int, int, int]  # (n, m, p)
    rank: int
    layout: str  # "alphatensor" (c = vec(C^T)) or "row-major" (c = vec(C)), as given

    @property
    def n(self) -> int:
        return self.shape[0]

    @property
    def m(self) -> int:
        return self.shape[1]

    @property
    def p(self) -> int:
        return self.shape[2]

    @property
    def square(self) -> bool:
        return self.n == self.m == self.p

    @property
    def name(self) -> str:
        """``2x2`` for a square factorization, ``4x4x5`` for a rectangular one."""
        return f"{self.n}x{self.n}" if self.square else "x".join(map(str, self.shape))


def _product_error(u, v, w, shape, a, b, layout) -> float:
    n, _m, p = shape
    prod = (u.T @ a.reshape(-1)) * (v.T @ b.reshape(-1))
    c = w @ prod
    c = c.reshape(p, n).T if layout == "alphatensor" else c.reshape(n, p)
    ref = a @ b
    return float(np.max(np.abs(c - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def _shape_of(rows_u: int, rows_v: int, rows_w: int) -> tuple[int, int, int] | None:
    """(n, m, p) from the row counts n*m, m*p, p*n; None if there is none."""
    nmp = math.isqrt(rows_u * rows_v * rows_w)
    if nmp * nmp != rows_u * rows_v * rows_w or min(rows_u, rows_v, rows_w) < 1:
        return None
    n, m, p = nmp // rows_v, nmp // rows_w, nmp // rows_u
    return (n, m, p) if (n * m, m * p, p * n) == (rows_u, rows_v, rows_w) else None


def check_factorization(f: np.ndarray | tuple[np.ndarray, ...], where: str = "factorization", *, seed: int = 0,
                        tol: float = 1e-8, shape: tuple[int, int, int] | None = None) -> Factorization:
    """Validate the shapes and correctness on random matrices; :class:`InputError` if not.

    ``f`` is an array ``[3, n*n, R]`` or a tuple ``(u, v, w)`` of shapes ``[n*m, R]``,
    ``[m*p, R]``, ``[p*n, R]``; ``shape`` (``(n, m, p)``, e.g. from an ``.npz`` key) is
    checked against them when given.
    """
    expected = "expected shape [3, n*n, R] or u, v, w of shapes [n*m, R], [m*p, R], [p*n, R]"
    if isinstance(f, (tuple, list)):
        if len(f) != 3:
            raise InputError(f"{where}: {expected}, got {len(f)} matrices")
        parts = [np.asarray(x, dtype=np.float64) for x in f]
        if any(x.ndim != 2 for x in parts) or len({x.shape[1] for x in parts}) != 1:
            raise InputError(f"{where}: {expected}, got {', '.join(str(list(x.shape)) for x in parts)}")
    else:
        arr = np.asarray(f, dtype=np.float64)
        if arr.ndim != 3 or arr.shape[0] != 3:
            raise InputError(f"{where}: expected an array of shape [3, n*n, R], got shape {list(arr.shape)}")
        parts = list(arr)
    u, v, w = parts
    rank = u.shape[1]
    dims = _shape_of(u.shape[0], v.shape[0], w.shape[0]) if rank >= 1 else None
    if dims is None:
        got = list(np.shape(f)) if not isinstance(f, (tuple, list)) else [list(x.shape) for x in parts]
        raise InputError(f"{where}: {expected} (n*n a square and R >= 1), got {got}")
    if shape is not None and tuple(shape) != dims:
        raise InputError(f"{where}: the key says <{','.join(map(str, shape))}> but the matrices are of "
                         f"<{','.join(map(str, dims))}>")
    if not all(np.all(np.isfinite(x)) for x in parts):
        raise InputError(f"{where}: factorization has non-finite entries")
    n, m, p = dims
    rng = np.random.default_rng(seed)
    errors = {}
    for layout in ("alphatensor", "row-major"):
        err = max(_product_error(u, v, w, dims, rng.standard_normal((n, m)), rng.standard_normal((m, p)), layout)
                  for _ in range(3))
        errors[layout] = err
        if err <= tol:
            w_at = w if layout == "alphatensor" else _transpose_c(w, n, p)
            return Factorization(u, v, w_at, dims, rank, layout)
    what = f"{n}x{n}" if n == m == p else f"<{n},{m},{p}> ({n}x{m} times {m}x{p})"
    raise InputError(
        f"{where}: not a factorization of the {what} matrix multiplication tensor: on random matrices "
        f"the product is off by {errors['alphatensor']:.3g} (relative; C transposed, AlphaTensor's layout) "
        f"and {errors['row-major']:.3g} (C row-major)"
    )


def _transpose_c(w: np.ndarray, n: int, p: int | None = None) -> np.ndarray:
    """Rows of ``w`` indexed by vec(C) row-major (C is n x p) -> indexed by vec(C^T)."""
    p = n if p is None else p
    idx = np.array([(q % n) * p + q // n for q in range(n * p)])
    return w[idx]


# --------------------------------------------------------------------------- program

@dataclass(frozen=True)
class Region:
    """A rectangular part of a buffer: rows ``[r0, r0+rows)`` x columns ``[c0, c0+cols)``."""

    buf: str
    r0: int
    c0: int
    rows: int
    cols: int


@dataclass(frozen=True)
class Mat:
    """A grid of equally sized regions forming one ``rows x cols`` matrix."""

    tiles: tuple[tuple[Region, ...], ...]
    rows: int
    cols: int

    @property
    def regions(self) -> list[Region]:
        return [t for row in self.tiles for t in row]

    def split(self, nr: int, nc: int) -> list["Mat"]:
        """Row-major list of the ``nr x nc`` sub-blocks."""
        gr, gc = len(self.tiles), len(self.tiles[0])
        rs, cs = self.rows // nr, self.cols // nc
        out = []
        for i in range(nr):
            for j in range(nc):
                if gr >= nr and gc >= nc:
                    hr, hc = gr // nr, gc // nc
                    out.append(Mat(tuple(tuple(self.tiles[i * hr + a][j * hc + b] for b in range(hc)) for a in range(hr)),
                                   rs, cs))
                else:  # one region: subdivide it
                    t = self.tiles[0][0]
                    out.append(Mat(((Region(t.buf, t.r0 + i * rs, t.c0 + j * cs, rs, cs),),), rs, cs))
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
    """The recursive program of a ``<n, m, p>`` factorization; ``size`` is the rows of ``A``."""

    n: int
    rank: int
    depth: int
    size: int
    block: int
    layout: str
    m: int = 0
    p: int = 0
    buffers: dict[str, tuple[int, int, str]] = field(default_factory=dict)  # id -> (rows, cols, kind)
    steps: list[Step] = field(default_factory=list)
    A: Mat | None = None
    B: Mat | None = None
    C: Mat | None = None


def _grid(prog: Program, name: str, kind: str, gr: int, gc: int) -> Mat:
    tiles = []
    for i in range(gr):
        row = []
        for j in range(gc):
            bid = f"{name}_{i}_{j}"
            prog.buffers[bid] = (prog.block, prog.block, kind)
            row.append(Region(bid, 0, 0, prog.block, prog.block))
        tiles.append(tuple(row))
    return Mat(tuple(tiles), gr * prog.block, gc * prog.block)


def _temp(prog: Program, name: str, rows: int, cols: int) -> Mat:
    prog.buffers[name] = (rows, cols, "activation")
    return Mat(((Region(name, 0, 0, rows, cols),),), rows, cols)


MAX_LEAF_PRODUCTS = 100_000  # Strassen at depth 5 (16,807 products) takes ~6 s and 0.5 GB; depth 6 would take ~8x that
MAX_DEPTH = 32


def max_depth(rank: int) -> int:
    """The deepest recursion allowed for a rank-``rank`` factorization: ``rank**depth <= MAX_LEAF_PRODUCTS``."""
    depth = 1
    while depth < MAX_DEPTH and rank ** (depth + 1) <= MAX_LEAF_PRODUCTS:
        depth += 1
    return depth


def build_program(factorization: Factorization | np.ndarray | tuple, *, depth: int = 1, size: int | None = None,
                  block: int | None = None) -> Program:
    """The recursive program (see the module docstring); ``size`` = N (rows of ``A``), or give ``block``."""
    fz = factorization if isinstance(factorization, Factorization) else check_factorization(factorization)
    if depth < 1:
        raise InputError(f"matmul: depth must be at least 1, got {depth}")
    deepest = max_depth(fz.rank)
    if depth > deepest:
        count = f"{fz.rank}**{depth} = {fz.rank ** depth}" if depth <= 64 else f"{fz.rank}**{depth}"
        raise InputError(f"matmul: depth {depth} gives {count} leaf products, more than the limit of "
                         f"{MAX_LEAF_PRODUCTS} (at most depth {deepest} for this rank-{fz.rank} factorization)")
    g = fz.n ** depth
    if size is None:
        block = 256 if block is None else block
        size = g * block
    elif block is not None and block * g != size:
        raise InputError(f"matmul: size {size} != n**depth ({g}) x block ({block})")
    if size < g or size % g:
        raise InputError(f"matmul: matrix size {size} must be a positive multiple of n**depth = {g}")
    block = size // g
    prog = Program(fz.n, fz.rank, depth, size, block, fz.layout, fz.m, fz.p)
    gn, gm, gp = fz.n ** depth, fz.m ** depth, fz.p ** depth
    prog.A, prog.B = _grid(prog, "A", "input", gn, gm), _grid(prog, "B", "input", gm, gp)
    prog.C = _grid(prog, "C", "output", gn, gp)
    _mul(prog, fz, prog.A, prog.B, prog.C, 0, "")
    return prog


def _combo(prog: Program, parts: list[Mat], coefs: np.ndarray, name: str) -> Mat:
    terms = [(float(c), m) for c, m in zip(coefs, parts) if c != 0]
    if not terms:
        raise InputError(f"matmul: factor {name} has an all-zero column")
    if len(terms) == 1 and terms[0][0] == 1.0:
        return terms[0][1]
    dst = _temp(prog, name, terms[0][1].rows, terms[0][1].cols)
    prog.steps.append(Step(f"add:{name}", "add", dst, tuple(terms)))
    return dst


def _mul(prog: Program, fz: Factorization, A: Mat, B: Mat, out: Mat, level: int, path: str) -> None:
    if level == prog.depth:
        prog.steps.append(Step(f"matmul:{path}", "matmul", out, ((1.0, A), (1.0, B))))
        return
    n, m, p = fz.shape
    As, Bs, Cs = A.split(n, m), B.split(m, p), out.split(n, p)
    started = [False] * (n * p)
    for r in range(fz.rank):
        q = f"{path}.{r}" if path else f"{r}"
        S = _combo(prog, As, fz.u[:, r], f"S{q}")
        T = _combo(prog, Bs, fz.v[:, r], f"T{q}")
        targets = [(k, float(fz.w[k, r])) for k in range(n * p) if fz.w[k, r] != 0]
        # w is indexed by vec(C^T): k = col * n + row  ->  sub-block (row, col) of out
        blocks = [(Cs[(k % n) * p + k // n], k, c) for k, c in targets]
        if len(blocks) == 1 and blocks[0][2] == 1.0 and not started[blocks[0][1]]:
            _mul(prog, fz, S, T, blocks[0][0], level + 1, q)
            started[blocks[0][1]] = True
            continue
        M = _temp(prog, f"M{q}", S.rows, T.cols)
        _mul(prog, fz, S, T, M, level + 1, q)
        for dst, k, c in blocks:
            prog.steps.append(Step(f"acc:{q}>{k}", "accumulate", dst, ((c, M),), init=not started[k]))
            started[k] = True
    if not all(started):
        raise InputError("matmul: factorization leaves an output block unwritten")


# --------------------------------------------------------------------------- execution

def run_program(prog: Program, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Execute the program with NumPy (float64) and return ``C``; used to check correctness."""
    mem = {bid: np.zeros((rows, cols)) for bid, (rows, cols, _kind) in prog.buffers.items()}

    def view(t: Region) -> np.ndarray:
        return mem[t.buf][t.r0:t.r0 + t.rows, t.c0:t.c0 + t.cols]

    def read(m: Mat) -> np.ndarray:
        return np.block([[view(t) for t in row] for row in m.tiles])

    def write(m: Mat, x: np.ndarray) -> None:
        hr, hc = m.rows // len(m.tiles), m.cols // len(m.tiles[0])
        for i, row in enumerate(m.tiles):
            for j, t in enumerate(row):
                view(t)[...] = x[i * hr:(i + 1) * hr, j * hc:(j + 1) * hc]

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
    if name is None:
        dims = f"n{prog.n}" if prog.n == prog.m == prog.p else f"{prog.n}x{prog.m}x{prog.p}"
        name = f"matmul_{dims}_r{prog.rank}_d{prog.depth}_N{prog.size}"
    b = WorkloadBuilder(name, source=source)
    for bid, (rows, cols, kind) in prog.buffers.items():
        b.add_buffer(bid, rows * cols * item, kind)

    def touches(m: Mat) -> list[tuple[str, int]]:
        return [(t.buf, t.rows * t.cols * item) for t in m.regions]

    for s in prog.steps:
        elems = s.dst.rows * s.dst.cols
        if s.kind == "add":
            flops = (len(s.srcs) - 1) * elems + sum(elems for c, _ in s.srcs if abs(c) != 1.0)
            reads = [x for _, m in s.srcs for x in touches(m)]
        elif s.kind == "matmul":
            a, bm = s.srcs[0][1], s.srcs[1][1]
            flops = 2.0 * a.rows * a.cols * bm.cols
            reads = touches(a) + touches(bm)
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


def _key_shape(source: str) -> tuple[int, int, int] | None:
    """``(n, m, p)`` from a ``FILE.npz:n,m,p`` source, else None."""
    key = source.rsplit(".npz:", 1)[1] if ".npz:" in source else ""
    parts = key.split(",")
    return tuple(int(x) for x in parts) if len(parts) == 3 and all(x.strip().isdigit() for x in parts) else None


def import_matmul(factorization: str | os.PathLike | np.ndarray | tuple | None = None, *, depth: int = 1,
                  size: int | None = None, block: int | None = None, dtype: str = "f32",
                  name: str | None = None) -> Problem:
    """Workload of the recursive program of ``factorization`` (default Strassen).

    ``factorization``: a built-in name, a file (``F.npy``, ``F.npz``, ``F.npz:KEY`` such as
    AlphaTensor's ``factorizations_r.npz:4,4,5``), an array ``[3, n*n, R]`` or a tuple
    ``(u, v, w)``. ``size`` is N, the rows of ``A`` (default ``n**depth * 256``), or give the
    ``block`` side.
    """
    in_memory = isinstance(factorization, (np.ndarray, tuple, list))
    where = "strassen" if factorization is None else ("factorization" if in_memory else str(factorization))
    raw = strassen() if factorization is None else (factorization if in_memory else load_factorization(factorization))
    fz = check_factorization(raw, where, shape=None if in_memory else _key_shape(where))
    prog = build_program(fz, depth=depth, size=size, block=block)
    return program_problem(prog, dtype=dtype, name=name, source=where)


__all__ = ["Factorization", "Program", "build_program", "check_factorization", "import_matmul",
           "load_factorization", "naive", "program_problem", "run_program", "strassen", "summarize"]
