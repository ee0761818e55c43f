"""msa's overlap ratio (XLA's max_overlap_to_async_copy_ratio), or its cross-program prefetches, on the suites.

One ``msa_run`` per program and setting, in this process (the solver's algorithm, no variants), in prefetch
mode at each suite's capacity: the default ratio 10 per buffer (``buffer``), XLA's per-memory rule
(``memory``), and ratios 30, 100 and 300 per buffer. The solve session's ``msa+overlap-100`` baseline is
the 100 column. ``--compare cross-program``: XLA's ``max_cross_program_prefetches`` of 0 (msa's default here),
1 (XLA's default, the ``msa+cross-program-prefetch`` variant), 2, 4, 8, 32 and every candidate. Prints each value and
run time, and each setting's geo-mean ratio to the first::

    nice python experiments/msa_overlap_ratio.py --suites xla,realistic
    nice python experiments/msa_overlap_ratio.py --suites xla,realistic --compare cross-program --out msa_cross_program.md
"""

from __future__ import annotations

import argparse
import math
import time

from _common import Transcript, fenced, write_results

from mallocgame.algorithms.memory_space_assignment import msa_run
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries

SETTINGS = {
    "overlap": (("r10", {}), ("memory", {"max_overlap": "memory"}), ("r30", {"overlap_ratio": 30.0}),
                ("r100", {"overlap_ratio": 100.0}), ("r300", {"overlap_ratio": 300.0})),
    "cross-program": tuple((f"cpp{k}", {"cross_program_prefetch": k}) for k in (0, 1, 2, 4, 8, 32))
    + (("cpp-all", {"cross_program_prefetch": 10**9}),),
}
TITLES = {"overlap": "msa's overlap ratio", "cross-program": "msa's cross-program prefetches"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", default="xla,realistic")
    ap.add_argument("--compare", choices=sorted(SETTINGS), default="overlap")
    ap.add_argument("--out", default="msa_overlap_ratio.md")
    args = ap.parse_args()
    settings = SETTINGS[args.compare]
    out = Transcript()
    out(f"{'suite':9s} {'program':26s} {'buffers':>7s} " + " ".join(f"{k:>16s}" for k, _ in settings))
    logs = {k: [] for k, _ in settings}
    for suite in args.suites.split(","):
        for e in suite_entries(suite):
            problem, _ = prepare(e.build(), mode="prefetch")
            if not problem.has_ops or problem.capacity is None:
                continue
            ev = PrefetchEvaluator.of(problem, problem.hardware)
            cells, base = [], None
            for key, opts in settings:
                t = time.monotonic()
                answer, _ = msa_run(problem, problem.hardware, float("inf"), **opts)
                value = ev.value(answer)
                base = value if base is None else base
                if base > 0 and value > 0:
                    logs[key].append(math.log(value / base))
                cells.append(f"{value:9.4g} ({time.monotonic() - t:4.1f}s)")
            out(f"{suite:9s} {e.name:26s} {problem.n:7d} " + " ".join(f"{c:>16s}" for c in cells))
    out()
    out(f"geo-mean ratio to {settings[0][0]}: " + ", ".join(
        f"{k} {math.exp(sum(v) / len(v)):.4f} (better on {sum(x > 1e-12 for x in v)}, worse on "
        f"{sum(x < -1e-12 for x in v)} of {len(v)})" for k, v in logs.items() if v))
    write_results(args.out, f"# {TITLES[args.compare]}\n\nOne msa_run per program and setting (no variants), each "
                  "suite's capacity, prefetch mode.\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
