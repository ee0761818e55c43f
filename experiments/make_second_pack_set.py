"""Write a second pack-mode instance set, in the style of MiniMalloc's challenging set, as CSV files.

The set is fixed here (generator, parameters, seeds) *before* pack-search was run on it; it exists to
compare pack-search with MiniMalloc on instances neither was tuned on (issue 19, item 2).

How it imitates MiniMalloc's challenging set (google/minimalloc ``benchmarks/challenging``): that
repository ships the instances but no generator. Its files have every ``lower``, ``upper`` and
``size`` a multiple of 1024, lifetimes within ``[0, 2**20]``, capacity ``2**20``, 154-454 buffers,
and buffers covering 61-95% of the ``2**20 x 2**20`` time x address square (8 of 11 reach the
capacity at their busiest moment). So each instance here is:

1. :func:`mallocgame.inputs.generate.packed_instance` on a ``1024 x 1024`` grid (random guillotine
   cuts of the square into ``n`` rectangles: a perfect packing exists), scaled by 1024 so that
   every number is a multiple of 1024 within ``[0, 2**20]`` as in MiniMalloc's files;
2. then a seeded random ``DROP`` share of the rectangles removed (so about ``1 - DROP`` of the
   square is covered, as in MiniMalloc's files, and some free space gives the search room);
3. written as ``NAME.1048576.csv`` (``id,lower,upper,size``; capacity 2**20 in the file name, the
   convention of MiniMalloc's files and of ``experiments/bench_pack_search.py --instances``).

Feasible by construction (the kept rectangles keep their guillotine offsets). ``DROP`` was chosen
by running MiniMalloc alone (never pack-search) on these ten instances at drops 0.10, 0.20, 0.25
and 0.30: it solved 0 of 10 within 20 s at 0.10, 4 of 10 within 30 s at 0.20, 7 of 10 within 40 s
at 0.25, and the three of 0.30 tried (n200s0, n600s0, n1000s0) within 2.2 s. 0.25 is the one
where it solves most but not all, so the set can rank the two.

A harder variant, declared (and committed) after the 0.25 run and before pack-search was run on it:
the same ten instances at ``--drop 0.20`` (MiniMalloc alone: 4 of 10 within 30 s), written by
``python experiments/make_second_pack_set.py OUT_DIR --drop 0.20``. No other value is used.

Usage (from the project root):
    python experiments/make_second_pack_set.py OUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mallocgame.inputs.generate import packed_instance

GRID = 1024  # cells per side before scaling
SCALE = 1024  # so every number is a multiple of 1024 within [0, 2**20], as in MiniMalloc's files
CAPACITY = GRID * SCALE
SIZES = (200, 400, 600, 800, 1000)  # rectangles cut, before the drop
SEEDS = (0, 1)  # packed_instance seeds per size
DROP = 0.25  # share of the rectangles removed (seeded); chosen with MiniMalloc alone, see the docstring
DROP_SEED = 19  # issue 19


def instance_rows(n: int, seed: int, drop: float = DROP) -> list[tuple[str, int, int, int]]:
    """The ``(id, lower, upper, size)`` rows of one instance: ``n`` guillotine cuts, ``drop`` of them removed."""
    prob, _offsets = packed_instance(n, seed=seed, capacity=GRID, horizon=GRID)
    rng = np.random.default_rng([DROP_SEED, n, seed])
    keep = rng.random(len(prob.buffers)) >= drop
    return [(b.id, b.start * SCALE, b.end * SCALE, b.size * SCALE)
            for b, k in zip(prob.buffers, keep.tolist()) if k]


def write_set(out: Path, sizes=SIZES, seeds=SEEDS, drop: float = DROP) -> list[Path]:
    """Write every instance of the set to ``out`` as ``n{N}s{SEED}.1048576.csv``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in sizes:
        for seed in seeds:
            path = out / f"n{n}s{seed}.{CAPACITY}.csv"
            lines = ["id,lower,upper,size"] + [f"{i},{lo},{hi},{sz}" for i, lo, hi, sz in instance_rows(n, seed, drop)]
            path.write_text("\n".join(lines) + "\n")
            paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder to write the CSV files to")
    ap.add_argument("--drop", type=float, default=DROP, help=f"share of rectangles removed (default {DROP}; "
                                                              "0.20 for the declared harder variant)")
    args = ap.parse_args(argv)
    for path in write_set(args.out, drop=args.drop):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
