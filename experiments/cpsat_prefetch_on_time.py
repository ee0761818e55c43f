"""Does the cpsat solver's prefetch mode end on time at 7-13k buffers, as a portfolio member does? (issue 18 item 4)

Per xla-suite entry, in this process: the solve session's baselines built first (within ``--baselines`` seconds,
as a portfolio builds them before it forks its members), then the cpsat solver called directly (no child, no
bound) with ``--time-limit`` and no hint; prints its wall time against the limit, its value, its start and the
windows solved::

    nice python experiments/cpsat_prefetch_on_time.py --time-limit 30
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import session_for
from mallocgame.solvers.cpsat.prefetch_windows import solve_prefetch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--entries", default="lstm2-scan128-train,lstm3-scan150-train")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--baselines", type=float, default=30.0)
    ap.add_argument("--out", default="cpsat_prefetch_on_time.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':22s} {'buffers':>7s} {'limit':>6s} {'wall':>6s} {'value':>10s} {'windows':>7s} {'improved':>8s} start")
    for e, problem in prefetch_programs(args.suite, args.entries):  # the suite's capacity
        session = session_for(problem, problem.hardware)
        session.warm()
        session.baselines(time.monotonic() + args.baselines)
        t = time.monotonic()
        sol = solve_prefetch(SolveRequest.of(problem, time_limit=args.time_limit, seed=0))
        wall = time.monotonic() - t
        st = sol.stats
        out(f"{e.name:22s} {problem.n:7d} {args.time_limit:6.1f} {wall:6.2f} {sol.objective:10.6g} "
            f"{st.get('windows_solved', 0):7d} {st.get('windows_improved', 0):8d} {st.get('start')}")
    write_results(args.out, "# cpsat (prefetch) on time at the LSTM steps' size\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
