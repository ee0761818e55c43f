"""The starts a prefetch search can have on the xla suite: every session baseline and the prefetch game's greedy.

For each program of the ``xla`` suite in prefetch mode at the suite's capacity, in this process: every baseline of
the solve session (:data:`mallocgame.engine.session.BASELINES`: the lifted greedy-xla answer, msa, its reruns and XLA
variants), built without a deadline, and the greedy playout of the prefetch game (``variant="prefetch"``, the
searches' ``k``, buffers in XLA's order: what ``mcts`` and ``muzero`` finish their episodes with). Prints each
value, its ratio to msa, and the seconds it took; the best start per program is marked. What the window search
and the portfolio could start from (issue 18 item 4)::

    nice python experiments/prefetch_starts.py [--entries a,b]
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, fenced, prefetch_programs, write_results

from mallocgame.engine.session import BASELINES, session_for
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.search.game import GameConfig
from mallocgame.search.uct import PREFETCH_K, greedy_prefetch_intervals


def game_greedy(problem, order: str = "xla") -> tuple[list, float]:
    """The prefetch game played greedily to the end: (intervals, seconds)."""
    t = time.monotonic()
    played = greedy_prefetch_intervals(problem, problem.hardware, GameConfig(variant="prefetch", k=PREFETCH_K,
                                                                             order=order))
    return played, time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--out", default="prefetch_starts.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':24s} {'buffers':>7s} {'start':28s} {'value':>10s} {'x msa':>6s} {'seconds':>7s}")
    for e, problem in prefetch_programs("xla", args.entries):
        session = session_for(problem, problem.hardware)
        ev = PrefetchEvaluator.of(problem, problem.hardware)
        rows = []
        for name in BASELINES["prefetch"]:
            t = time.monotonic()
            b = session.baseline(name)
            if b is not None:
                rows.append((name, b.objective, time.monotonic() - t))
        intervals, seconds = game_greedy(problem)
        rows.append(("game greedy (xla order)", ev.value(intervals), seconds))
        msa = next((v for n, v, _ in rows if n == "msa"), None)
        best = max(v for _, v, _ in rows)
        for name, value, secs in rows:
            ratio = f"{value / msa:6.3f}" if msa else f"{'-':>6s}"
            mark = " *" if value == best else ""
            out(f"{e.name:24s} {problem.n:7d} {name:28s} {value:10.5g} {ratio} {secs:7.1f}{mark}")
    out()
    out("* the best start of the program")
    write_results(args.out, "# The starts of a prefetch search on the xla suite\n\n"
                  "Every session baseline built without a deadline, and the prefetch game's greedy playout; in one "
                  "process, seconds are wall times at the load in the provenance line.\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
