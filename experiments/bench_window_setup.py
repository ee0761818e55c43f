"""The prefetch window search's set-up (cpsat): candidate stays and window plans, timed on real programs.

For each program of the ``xla`` suite (and a few realistic ones), in prefetch mode at the suite's
capacity: :func:`~mallocgame.solvers.cpsat.prefetch_windows.candidates` over the budgets the search uses
(the op-time floor and the lifted greedy's op times, the lifted greedy's intervals as extra stays), then
:func:`~mallocgame.solvers.cpsat.prefetch_windows.windows` at three sizes and phases. Prints their times
and the SHA-256 of their output (to check that a rewrite gives the same candidates and windows)::

    nice python experiments/bench_window_setup.py
"""

from __future__ import annotations

import argparse
import hashlib
import time

from _common import Transcript, fenced, write_results

from mallocgame.hardware.evaluator import Evaluator
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.session import session_for
from mallocgame.solvers.cpsat import prefetch_windows as pw

REALISTIC = ("bert-base-b1", "gpt2-small-decode-b8", "strassen-d2-n2048", "mobilenetv2-b1")
PLANS = ((30, 0.0), (60, 0.5), (240, 0.25))  # (stays per window, phase)


def digest(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="window_setup.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':26s} {'buffers':>7s} {'stays':>8s} {'cand s':>7s} {'windows s':>9s} {'candidates':>16s} "
        f"{'windows':>16s}")
    for suite, wanted in (("xla", None), ("realistic", REALISTIC)):
        for e in suite_entries(suite):
            if wanted is not None and e.name not in wanted:
                continue
            problem, _ = prepare(e.build(), mode="prefetch")
            session = session_for(problem, problem.hardware)
            lifted = list(session.baseline("greedy-xla").intervals)
            ev = Evaluator.of(problem, problem.hardware)
            budgets = [pw.op_time_floor(problem, ev), session.prefetch_evaluator.op_times(lifted)]
            t = time.monotonic()
            stays = pw.candidates(problem, problem.hardware, budgets, lifted)
            t_cand = time.monotonic() - t
            t = time.monotonic()
            plans = [pw.windows(stays, size, phase) for size, phase in PLANS]
            t_win = time.monotonic() - t
            keys = [(s.buffer, s.start, s.end, s.copy_start, s.prefetch, s.eviction) for s in stays]
            out(f"{e.name:26s} {problem.n:7d} {len(stays):8d} {t_cand:7.2f} {t_win:9.2f} {digest(keys):>16s} "
                f"{digest(plans):>16s}")
    write_results(args.out, "# The prefetch window search's set-up\n\nCandidate stays and three window plans "
                  f"{PLANS} per program (cpsat, prefetch mode, each suite's capacity).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
