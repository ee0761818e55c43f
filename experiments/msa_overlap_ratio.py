"""msa's overlap ratio (XLA's max_overlap_to_async_copy_ratio) on the xla and realistic suites.

One ``msa_run`` per program and setting, in this process (the solver's algorithm, no variants), in prefetch
mode at each suite's capacity: the default ratio 10 per buffer (``buffer``), XLA's per-memory rule
(``memory``), and ratios 30, 100 and 300 per buffer. The solve session's ``msa+overlap-100`` baseline is
the 100 column. Prints each value and run time, and each setting's geo-mean ratio to the default::

    nice python experiments/msa_overlap_ratio.py --suites xla,realistic
"""

from __future__ import annotations

import argparse
import math
import time

from _common import Transcript, fenced, write_results

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.memory_space_assignment import msa_run

SETTINGS = (("r10", {}), ("memory", {"max_overlap": "memory"}), ("r30", {"overlap_ratio": 30.0}),
            ("r100", {"overlap_ratio": 100.0}), ("r300", {"overlap_ratio": 300.0}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", default="xla,realistic")
    ap.add_argument("--out", default="msa_overlap_ratio.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'suite':9s} {'program':26s} {'buffers':>7s} " + " ".join(f"{k:>16s}" for k, _ in SETTINGS))
    logs = {k: [] for k, _ in SETTINGS}
    for suite in args.suites.split(","):
        for e in suite_entries(suite):
            problem, _ = prepare(e.build(), mode="prefetch")
            if not problem.has_ops or problem.capacity is None:
                continue
            ev = PrefetchEvaluator.of(problem, problem.hardware)
            cells, base = [], None
            for key, opts in SETTINGS:
                t = time.monotonic()
                answer, _ = msa_run(problem, problem.hardware, float("inf"), **opts)
                value = ev.value(answer)
                base = value if base is None else base
                if base > 0 and value > 0:
                    logs[key].append(math.log(value / base))
                cells.append(f"{value:9.4g} ({time.monotonic() - t:4.1f}s)")
            out(f"{suite:9s} {e.name:26s} {problem.n:7d} " + " ".join(f"{c:>16s}" for c in cells))
    out()
    out("geo-mean ratio to r10: " + ", ".join(
        f"{k} {math.exp(sum(v) / len(v)):.4f} (better on {sum(x > 1e-12 for x in v)}, worse on "
        f"{sum(x < -1e-12 for x in v)} of {len(v)})" for k, v in logs.items() if v))
    write_results(args.out, "# msa's overlap ratio\n\nOne msa_run per program and setting (no variants), each "
                  "suite's capacity, prefetch mode.\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
