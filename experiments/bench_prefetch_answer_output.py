"""Side by side, in one process: what ``mallocgame solve`` does with a prefetch answer after the solver, at 200k buffers.

On a workload read and prepared as ``solve --mode prefetch`` does, with msa's answer (run here first, in-process),
each row times one step of the path from the solver's answer to the files, twice, the Python reference
(``MALLOCGAME_ENGINE=python``) and the native engine, one after the other, so a busy machine slows both alike; CPU
seconds (``time.process_time``) beside wall seconds, the median of ``--repeats`` runs. Every run gets a fresh tuple of
the same intervals (read anew, as a new answer is):

* ``judge``: ``mallocgame.engine.report.judge`` (``copies=False``, as a report scores: validated, placed buffers and
  peak counted, its time from the prefetch evaluator);
* ``report pickled``: ``pickle.dumps`` of the child's report (made by ``score``; its intervals go as columns; the
  seconds of the dumps alone);
* ``report unpickled``: ``pickle.loads`` of it in the parent (the intervals made again);
* ``report JSON``: the document ``solve --report`` writes (``mallocgame.cli.solve._report_json`` and ``dump_json``);
* ``intervals CSV``: ``mallocgame.formats.io.intervals_csv_text`` (``-o``), the Python rows against the compiled rows.

Each row says whether both gave the same answer (verdict, report, text byte for byte). Run it with ``PYTHONPATH`` at
another checkout (e.g. a copy of main) to time that checkout's code: the script calls nothing it lacks.

    nice python experiments/bench_prefetch_answer_output.py [--workload /tmp/scale3/layered-200000.json]
        [--repeats 3] [--out prefetch_answer_output_200k.md]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import OwnSeconds, reference_vs_native, write_results

    import mallocgame
    from mallocgame.cli.common import dump_json
    from mallocgame.cli.solve import _report_json
    from mallocgame.engine.report import judge, score
    from mallocgame.engine.session import session_for
    from mallocgame.engine.solving import solve_with_warm_start
    from mallocgame.formats.io import intervals_csv_text
    from mallocgame.inputs.load import prepare, read_problem
    from mallocgame.problem.model import Solution, Status

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="/tmp/scale3/layered-200000.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="prefetch_answer_output_200k.md")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    problem, spec = prepare(read_problem(args.workload), mode="prefetch")
    load = time.monotonic() - t0
    t0 = time.monotonic()
    found = solve_with_warm_start("msa", problem, spec, time_limit=30.0, seed=0, compute_bound=False,
                                  facts=session_for(problem, spec))
    solved = time.monotonic() - t0
    answer = list(found.intervals)
    print(found.summary(has_ops=problem.has_ops), f"({len(answer)} intervals, {solved:.1f} s)", flush=True)

    def fresh() -> tuple:
        return tuple(answer[:])  # a new tuple: read again, as a new answer is

    def judged():
        j = judge(problem, spec, fresh(), copies=False)
        return j.violation, j.placed, j.peak, j.estimated_time

    def scored():
        return score(problem, spec, Solution((None,) * problem.n, Status.FEASIBLE, "prefetch", solver="msa",
                                             intervals=fresh()), seconds=1.0, bound=None, solver_name="msa")

    def pickled():
        report = scored()  # untimed part: its intervals' columns are read by the judge, as in a child
        t = time.monotonic()
        data = pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
        return OwnSeconds(data, time.monotonic() - t)  # the dumps alone (its CPU is the wall's here)

    report = scored()
    data = pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
    unstamped = {"timestamp": ""}  # the document's time: the same text in both engines
    table = reference_vs_native((
        ("judge", judged),
        ("report pickled (child)", pickled),
        ("report unpickled (parent)", lambda: pickle.loads(data)),
        ("report JSON", lambda: dump_json(_report_json(report, problem, spec, False) | unstamped)),
        ("intervals CSV", lambda: intervals_csv_text(problem, fresh()))), repeats=args.repeats, digits=3)
    lines = ["# A 200k-buffer prefetch answer: judged, carried to the parent and written, reference vs native", "",
             f"Workload `{Path(args.workload).name}`: {problem.n} buffers, read and prepared in {load:.1f} s; the answer: "
             f"msa's, {len(answer)} intervals ({solved:.1f} s). Code: `{Path(mallocgame.__file__).parent}`. Median seconds of "
             f"{args.repeats} runs each, CPU and wall, on a machine shared with other jobs (run under nice).", "", table]
    write_results(args.out, "\n".join(lines), argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
