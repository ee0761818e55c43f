"""Side by side, in one process: what ``mallocgame solve`` does with a pack answer after the solver, at 2M buffers.

On a workload read and prepared as ``solve --mode pack --minimize-peak`` does, with the answer a big input's child
sends first (every buffer stacked, an int64 array), each row times one step of the parent's path twice, the
Python reference (``MALLOCGAME_ENGINE=python``) and the native engine, one
after the other, so a busy machine slows both alike; CPU seconds (``time.process_time``) beside wall seconds:

* ``validate + score``: ``mallocgame.engine.report.stopped_at_limit`` (the answer validated, its peak and placed
  buffers counted, the report made);
* ``validate a clash``: ``mallocgame.hardware.validator.validate`` on the same answer with one buffer moved onto
  another (an invalid answer: both engines must name the same pair);
* ``report offsets by id``: ``mallocgame.cli.common.offsets_by_id`` and ``dump_json`` of the report's offsets
  (the same code in both engines: what the report JSON still costs);
* ``solution CSV``: ``mallocgame.formats.io.problem_csv_text`` (``-o``), the Python join against the compiled rows.

Each row says whether both gave the same answer (verdict, report fields, text byte for byte).

    nice python experiments/bench_answer_output.py [--workload /tmp/scale3/layered-2000000.json]
        [--out answer_output_2m.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import reference_vs_native, write_results

    from mallocgame.algorithms.placement import stacked_offsets
    from mallocgame.cli.common import dump_json, offsets_by_id
    from mallocgame.engine.report import stopped_at_limit
    from mallocgame.formats.io import problem_csv_text
    from mallocgame.hardware.validator import validate
    from mallocgame.inputs.load import prepare, read_problem
    from mallocgame.runtime.incumbents import Improvement, Incumbent

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="/tmp/scale3/layered-2000000.json")
    ap.add_argument("--out", default="answer_output_2m.md")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    problem, spec = prepare(read_problem(args.workload), mode="pack", minimize_peak=True)
    load = time.monotonic() - t0
    a = problem.arrays
    incumbent = Incumbent(Improvement(0.1, 0.0, "every buffer stacked (first answer)"),
                          stacked_offsets(a.size, a.alignment, 0))
    clash = list(incumbent.offsets.tolist())
    late = int(a.start.argmax())  # a buffer live late, moved onto one live with it
    live = (a.start <= a.start[late]) & (a.start[late] < a.end)
    live[late] = False
    mate = int(live.argmax())
    clash[late] = clash[mate]

    def report():
        r = stopped_at_limit(problem, spec, incumbent, solver_name="best-fit", seconds=6.0, time_limit=5.0)
        return r.valid, r.objective, r.peak, r.placed, r.offsets

    table = reference_vs_native((
        ("validate + score", report),
        ("validate a clash", lambda: validate(problem, clash)),
        ("report offsets by id",
         lambda: dump_json({"offsets": offsets_by_id(problem, tuple(incumbent.offsets.tolist()))})),
        ("solution CSV", lambda: problem_csv_text(problem, tuple(incumbent.offsets.tolist())))))
    lines = ["# A 2M-buffer pack answer: validated, scored and written, reference vs native", "",
             f"Workload `{Path(args.workload).name}`: {problem.n} buffers, read and prepared in {load:.1f} s; the answer: "
             "every buffer stacked (what a big input's child sends first). Seconds of one run each, CPU and wall, "
             "on a machine shared with other jobs (run under nice).", "", table]
    write_results(args.out, "\n".join(lines), argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
