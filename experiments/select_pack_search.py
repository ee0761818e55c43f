"""select-pack in map mode with and without the pack search on its first choice (best fit alone, as before).

When best fit leaves part of the relaxation's choice without a place, select-pack's first round now
hands the whole choice to the pack search (``hybrid/select_pack.py``, ``PACK_SEARCH_SECONDS``). This
script runs ``select-pack`` both ways (``PACK_SEARCH_SECONDS = 0`` turns the step off) through
:func:`mallocgame.engine.runner.run_solver` (validated, scored by the evaluator), in this process, on

* ``minimalloc``: MiniMalloc's hard set (A-K, ``../shared/benchmarks/minimalloc``) in map mode at the
  capacity of the file name (their max live bytes);
* the map-mode suites ``realistic`` and ``quick`` (their own capacities), and ``xla`` (its programs in map mode at
  its capacity, 25% of the max live bytes: what the prefetch portfolio's ``select-pack`` member solves);
* generated layered networks of 500, 2,000 and 10,000 buffers at 40% of the max live bytes (``tpuv4i``).

One row per input: value without and with the step, their ratio, placed buffers, status, seconds.

Usage (from the project root):
    nice python experiments/select_pack_search.py [--time-limit 10] [--sets minimalloc,realistic,quick,layered]
        [--out select_pack_search.md]
"""

from __future__ import annotations

import argparse
import math

from _common import Transcript, benchmarks_dir, fenced, write_results

import mallocgame.hybrid.select_pack as select_pack
from mallocgame.engine.runner import run_solver
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem.intervals import max_live

SETS = ("minimalloc", "realistic", "quick", "layered")


def inputs(sets: list[str]):
    """``(set, name, problem, hardware)`` in map mode."""
    for name in sets:
        if name == "minimalloc":
            for path in sorted(benchmarks_dir("minimalloc").glob("*.csv")):
                problem, hw = prepare(read_problem(str(path)), mode="map")
                yield name, path.stem, problem, hw
        elif name == "layered":
            for n in (500, 2000, 10000):
                base = layered_network(n, seed=0)
                problem, hw = prepare(base, mode="map", hardware="tpuv4i",
                                      capacity=int(0.4 * max_live(base)))
                yield name, f"layered-{n}", problem, hw
        else:  # a suite's entries in map mode at its capacity (the xla suite's: the prefetch portfolio's map members)
            for e in suite_entries(name):
                problem, hw = prepare(e.build(), mode="map")
                yield name, e.name, problem, hw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="select_pack_search.md")
    args = ap.parse_args()
    show = Transcript()
    default = select_pack.PACK_SEARCH_SECONDS
    show(f"select-pack, map mode, time limit {args.time_limit:g} s, seed {args.seed}; "
         f"without = best fit alone, with = the pack search on the first choice (at most {default:g} s)")
    show(f"{'set':<11} {'input':<34} {'n':>6} {'without':>12} {'with':>12} {'ratio':>7} "
         f"{'placed':>15} {'status':>19} {'seconds':>11}")
    ratios: dict[str, list[float]] = {}
    for set_name, name, problem, hw in inputs(args.sets.split(",")):
        reports = []
        for seconds in (0.0, default):
            select_pack.PACK_SEARCH_SECONDS = seconds
            reports.append(run_solver("select-pack", problem, hw, time_limit=args.time_limit, seed=args.seed))
        select_pack.PACK_SEARCH_SECONDS = default
        before, after = reports
        assert before.valid and after.valid, (name, before.violation, after.violation)
        ratio = after.objective / before.objective if before.objective else 1.0
        ratios.setdefault(set_name, []).append(ratio)
        show(f"{set_name:<11} {name:<34} {problem.n:>6} {before.objective:>12.6g} {after.objective:>12.6g} "
             f"{ratio:>7.4f} {before.placed:>7}/{after.placed:<7} "
             f"{before.status:>9}/{after.status:<9} {before.seconds:>5.1f}/{after.seconds:<5.1f}")
    for set_name, rs in ratios.items():
        geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
        show(f"{set_name}: {len(rs)} inputs; with / without: geo-mean {geo:.4f}, better on "
             f"{sum(r > 1 + 1e-9 for r in rs)}, equal on {sum(abs(r - 1) <= 1e-9 for r in rs)}, "
             f"worse on {sum(r < 1 - 1e-9 for r in rs)}")
    write_results(args.out, "# select-pack with the pack search on its first choice (map mode)\n\n"
                  "Made by `experiments/select_pack_search.py` (its docstring says what is compared). "
                  "Output as printed:\n\n" + fenced(show.text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
