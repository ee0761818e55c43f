"""The prefetch bounds side by side (issue 18 item 5): per-op vs residency, and msa's gap to each.

For every entry of the given suites, capacity ``--fraction`` of max live bytes (in-place pairs
merged, as every solver sees them), prefetch mode on the entry's hardware (tpuv4i): msa's value,
the per-op bound (:func:`mallocgame.bounds.bounds.prefetch_upper_bound`), the residency bound
(:func:`mallocgame.bounds.prefetch_bound.residency_bound`, ``--time-limit`` seconds) and whether HiGHS
proved it, the gap of msa to the better bound, and the residency bound's LP size and time.
Valid bounds: msa's value is never above either (the script fails loudly if it is)::

    nice python experiments/bench_prefetch_bound.py --suites realistic,xla --fraction 0.25 --time-limit 30 \
        --generated 20000
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

from _common import Transcript, fenced, write_results

from mallocgame.algorithms.memory_space_assignment import msa_answer
from mallocgame.bounds.bounds import prefetch_upper_bound
from mallocgame.bounds.prefetch_bound import residency_bound
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.suites import suite_entries
from mallocgame.inputs.workloads import with_capacity
from mallocgame.problem.aliasing import merge_inplace


def _programs(args):
    """``(suite, name, build)`` per entry of the suites, then per generated size (seed 0)."""
    for suite in args.suites.split(","):
        for e in suite_entries(suite)[:args.limit or None]:
            yield suite, e.name, e.build
    for n in (int(v) for v in args.generated.split(",") if v):
        yield "generated", f"layered-{n}", functools.partial(layered_network, n, seed=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", default="realistic")
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--limit", type=int, default=0, help="at most this many entries per suite (0: all)")
    ap.add_argument("--generated", default="", help="also generated layered workloads of these sizes (comma list)")
    ap.add_argument("--out", default="prefetch_bound.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'suite':10s} {'program':28s} {'buffers':>7s} {'msa':>10s} {'per-op':>10s} {'residency':>10s} proved "
        f"{'gap per-op':>10s} {'gap best':>9s} {'bound s':>8s} {'vars':>7s} source")
    gaps_old, gaps_new = [], []
    for suite, name, build in _programs(args):
        problem = with_capacity(merge_inplace(build()), args.fraction).replace(mode="prefetch")
        hw = problem.hardware or PRESETS["tpuv4i"]
        answer = msa_answer(problem, hw, time.monotonic() + 120)
        value = PrefetchEvaluator.of(problem, hw).value(list(answer))
        per_op = prefetch_upper_bound(problem, hw).value
        res = residency_bound(problem, hw, time_limit=args.time_limit)
        best = min(per_op, res.value)
        if value > best * (1 + 1e-6) + 1e-15:
            raise SystemExit(f"{name}: msa's value {value} is above a bound ({per_op}, {res.value}): a bug")
        gap_old = (per_op - value) / per_op if per_op > 0 else 0.0
        gap_new = (best - value) / best if best > 0 else 0.0
        gaps_old.append(gap_old)
        gaps_new.append(gap_new)
        out(f"{suite:10s} {name:28s} {problem.n:7d} {value:10.4g} {per_op:10.4g} {res.value:10.4g} "
            f"{'yes' if res.solved else 'no':>6s} {gap_old:10.1%} {gap_new:9.1%} {res.seconds:8.1f} {res.variables:7d} "
            f"{res.source}")
    out()
    out(f"median gap of msa: to the per-op bound {statistics.median(gaps_old):.1%}, "
        f"to the better of the two {statistics.median(gaps_new):.1%} ({len(gaps_new)} programs)")
    write_results(args.out, "# The prefetch bounds: per-op vs residency\n\n"
                  f"Capacity {args.fraction:.0%} of max live, msa's answer, residency bound within "
                  f"{args.time_limit:g} s ('proved' = HiGHS proved the MIP optimal; source: where the value comes from, "
                  "docs/prefetch.md 'The residency bound').\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
