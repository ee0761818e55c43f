"""A lifted map answer's stays cut at their idle gaps (issue 18 item 4): what :func:`mallocgame.formats.lift.split_idle`
frees, what msa fills around it, and the window search (``cpsat``) from it, on the xla suite's programs.

Per entry, in prefetch mode at the suite's capacity, in this process: select-pack's map answer (``--map-limit``
seconds), lifted (:func:`mallocgame.formats.lift.lift_map_answer`); split_idle's cut answer (its value, the bytes x ops it
holds against the lifted answer's, its seconds); msa with the lifted stays committed first (``msa+hint``) and with
the cut ones (``msa+hint-split``, up to 120 s, and cut at 20 s); then, after the solve session's baselines are
built (as a portfolio does before it forks its members), the cpsat solver (``--time-limit`` seconds) hinted with
the lifted answer, whose starts include both; and the bound it reports::

    nice python experiments/bench_prefetch_split.py --entries lstm2-scan128-train,lstm3-scan150-train
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

import mallocgame
from mallocgame.algorithms.memory_space_assignment import msa_run
from mallocgame.engine.session import session_for
from mallocgame.formats.lift import lift_map_answer, split_idle
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.model import Solution, Status


def held(problem, answer) -> int:
    """Bytes x ops the answer holds in fast memory."""
    sizes = problem.arrays.size
    return sum(int(sizes[iv.buffer]) * (iv.end - iv.occupied_from) for iv in answer)


def msa_around(problem, start, seconds: float) -> tuple[float | None, float]:
    """msa with ``start`` committed first: its value (validated) and wall seconds."""
    t = time.monotonic()
    answer, _ = msa_run(problem, problem.hardware, time.monotonic() + seconds, start=list(start))
    ok = answer is not None and validate_intervals(problem, answer) is None
    return (PrefetchEvaluator.of(problem, problem.hardware).value(answer) if ok else None), time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--entries", default="lstm2-scan128-train,lstm3-scan150-train")
    ap.add_argument("--map-limit", type=float, default=60.0)
    ap.add_argument("--time-limit", type=float, default=55.0, help="cpsat's limit (portfolio's refill share)")
    ap.add_argument("--out", default="prefetch_split_xla.md")
    args = ap.parse_args()
    out = Transcript()
    for e, problem in prefetch_programs(args.suite, args.entries):  # the suite's capacity
        pev = PrefetchEvaluator.of(problem, problem.hardware)
        sp = mallocgame.solve(problem.replace(mode="map"), "select-pack", time_limit=args.map_limit)
        lifted = lift_map_answer(problem, sp.solution.offsets)
        t = time.monotonic()
        cut = split_idle(problem, problem.hardware, lifted)
        cut_s = time.monotonic() - t
        assert validate_intervals(problem, cut) is None
        out(f"{e.name} ({problem.n} buffers, {len(problem.ops)} ops)")
        out(f"  lifted select-pack   {pev.value(lifted):.6g}  stays {len(lifted)}  held {held(problem, lifted):.4g} B x ops")
        out(f"  split_idle           {pev.value(cut):.6g}  stays {len(cut)}  held {held(problem, cut):.4g} B x ops "
            f"({cut_s:.2f} s)")
        for label, start, seconds in (("msa+hint", lifted, 120.0), ("msa+hint-split", cut, 120.0),
                                      ("msa+hint-split, 20 s", cut, 20.0)):
            v, s = msa_around(problem, start, seconds)
            out(f"  {label:20s} {v:.6g}  ({s:.1f} s)")
        # the session's baselines first, within half of cpsat's limit, as a portfolio builds them before it forks
        # its cpsat members (which then have their whole share for the starts and the windows)
        session_for(problem, problem.hardware).baselines(time.monotonic() + 0.5 * args.time_limit)
        hint = Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, intervals=tuple(lifted))
        t = time.monotonic()
        r = mallocgame.solve(problem, "cpsat", time_limit=args.time_limit, hint=hint)
        st = r.solution.stats
        bound = r.solution.bound if r.solution.bound is not None else session_for(problem, problem.hardware).bound().value
        out(f"  cpsat from the lift  {r.objective:.6g}  ({time.monotonic() - t:.1f} s; start {st.get('start')} "
            f"{st.get('start_value', float('nan')):.6g}, windows {st.get('windows_solved')} improved "
            f"{st.get('windows_improved')}); valid {r.valid}")
        out(f"  x lifted select-pack {r.objective / pev.value(lifted):.3f}; bound {bound:.6g} "
            f"(x {bound / pev.value(lifted):.3f})")
    write_results(args.out, f"# Idle gaps cut: split_idle on the {args.suite} suite\n\n"
                  "Wall times on a shared machine (load average above).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
