"""Seeded generators of synthetic problems for tests, benchmarks and suites.

* :func:`layered_network`: a scheduled program of layers with weights, skip connections
  and scratch buffers (ops with FLOPs and operand bytes), as docs/architecture.md, "The model" uses;
* :func:`random_intervals`: a MiniMalloc-style CSV problem (lifetimes and sizes only);
* :func:`packed_instance`: a pack problem built around a hidden packing, so a solution
  within the capacity is known to exist.

Example:
    >>> p = layered_network(200, seed=1)
    >>> (p.n >= 200, p.capacity > 0, p.has_ops)
    (True, True, True)
"""

from __future__ import annotations

import numpy as np

from mallocgame.hardware.spec import PRESETS
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import Buffer, Op, Operand, Problem

ALIGN = PRESETS["tpuv4i"].alignment


def _size(rng: np.random.Generator, median: float, sigma: float = 0.7) -> int:
    raw = rng.lognormal(np.log(median), sigma)
    return int(max(ALIGN, round(raw / ALIGN) * ALIGN))


def layered_network(n_buffers: int, *, seed: int = 0, capacity_fraction: float = 0.4,
                    skip_prob: float = 0.25, scratch_prob: float = 0.3, name: str | None = None) -> Problem:
    """A program of about ``n_buffers`` buffers; capacity = ``capacity_fraction`` x max live bytes.

    Each layer reads the previous activation and its own weight (live only while used),
    sometimes a skip activation from a few layers back and a scratch buffer, and writes a
    new activation. Arithmetic intensity varies over two orders of magnitude, so some ops
    are compute-bound and some memory-bound on the ``tpuv4i`` preset.
    """
    rng = np.random.default_rng(seed)
    buffers: dict[str, list] = {}  # id -> [size, start, end, kind]
    ops: list[Op] = []
    act_median = 2**20

    def new_buffer(prefix: str, size: int, t: int, kind: str) -> str:
        bid = f"{prefix}{len(buffers)}"
        buffers[bid] = [size, t, t + 1, kind]
        return bid

    def touch(bid: str, t: int) -> None:
        buffers[bid][2] = max(buffers[bid][2], t + 1)

    t = 0
    acts = [new_buffer("in", _size(rng, act_median), 0, "input")]
    while len(buffers) < n_buffers:
        operands = []
        x = acts[-1]
        touch(x, t)
        operands.append(Operand(x, "read", buffers[x][0]))
        # Weights arrive a few ops early (prefetch), so they compete with activations.
        w = new_buffer("w", _size(rng, act_median * 1.5, 0.8), max(0, t - int(rng.integers(0, 6))), "weight")
        touch(w, t)
        operands.append(Operand(w, "read", buffers[w][0]))
        if len(acts) > 3 and rng.random() < skip_prob:
            s = acts[-int(rng.integers(2, min(12, len(acts)) + 1))]
            touch(s, t)
            operands.append(Operand(s, "read", buffers[s][0]))
        if rng.random() < scratch_prob:
            sc = new_buffer("s", _size(rng, act_median / 2), t, "scratch")
            operands.append(Operand(sc, "write", buffers[sc][0]))
        y = new_buffer("a", _size(rng, act_median), t, "activation")
        operands.append(Operand(y, "write", buffers[y][0]))
        acts.append(y)
        nbytes = sum(o.bytes for o in operands)
        intensity = float(np.exp(rng.uniform(np.log(20.0), np.log(2000.0))))
        kind = "matmul" if intensity > 150 else "elementwise"
        ops.append(Op(f"op{t}", kind, intensity * nbytes, 0, tuple(operands)))
        t += 1
    buffers[acts[-1]][3] = "output"
    bufs = tuple(Buffer(bid, s, a, b, None, ALIGN, k) for bid, (s, a, b, k) in buffers.items())
    problem = Problem(name=name or f"layered-{n_buffers}-s{seed}", buffers=bufs, ops=tuple(ops))
    cap = int(max_live(problem) * capacity_fraction) // ALIGN * ALIGN
    largest = max(b.size for b in bufs)
    return problem.replace(capacity=max(cap, ALIGN))  if cap >= ALIGN else problem.replace(capacity=largest)


def random_intervals(n: int, *, seed: int = 0, horizon: int | None = None, max_size: int = 64,
                     with_benefit: bool = False, name: str | None = None) -> Problem:
    """``n`` buffers with random lifetimes and sizes (no ops); capacity unset."""
    rng = np.random.default_rng(seed)
    horizon = horizon or max(4, n)
    start = rng.integers(0, horizon - 1, n)
    length = np.minimum(rng.geometric(4.0 / horizon, n), horizon - start)
    size = rng.integers(1, max_size + 1, n)
    benefit = rng.uniform(0, 10, n) if with_benefit else [None] * n
    bufs = tuple(Buffer(f"b{i}", int(size[i]), int(start[i]), int(start[i] + length[i]),
                        None if benefit[i] is None else float(round(benefit[i], 3))) for i in range(n))
    return Problem(name=name or f"random-{n}-s{seed}", buffers=bufs)


def packed_instance(n: int, *, seed: int = 0, capacity: int = 64, horizon: int = 40,
                    name: str | None = None) -> tuple[Problem, list[int]]:
    """A pack problem with a known packing within ``capacity`` (returned as offsets).

    Rectangles are cut from a ``horizon x capacity`` strip by random guillotine splits,
    then some are dropped, so the instance is tight but feasible.
    """
    rng = np.random.default_rng(seed)
    rects = [(0, horizon, 0, capacity)]  # (t0, t1, a0, a1)
    while len(rects) < n:
        k = int(np.argmax([(r[1] - r[0]) * (r[3] - r[2]) for r in rects]))
        t0, t1, a0, a1 = rects.pop(k)
        if (rng.random() < 0.5 and t1 - t0 > 1) or a1 - a0 <= 1:
            if t1 - t0 <= 1:
                rects.append((t0, t1, a0, a1))
                break
            cut = int(rng.integers(t0 + 1, t1))
            rects += [(t0, cut, a0, a1), (cut, t1, a0, a1)]
        else:
            cut = int(rng.integers(a0 + 1, a1))
            rects += [(t0, t1, a0, cut), (t0, t1, cut, a1)]
    order = rng.permutation(len(rects))
    bufs, offsets = [], []
    for k in order.tolist():
        t0, t1, a0, a1 = rects[k]
        bufs.append(Buffer(f"r{k}", a1 - a0, t0, t1))
        offsets.append(a0)
    return Problem(name=name or f"packed-{n}-s{seed}", buffers=tuple(bufs), capacity=capacity, mode="pack"), offsets
