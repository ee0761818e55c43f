"""While loops as XLA sees them (issue 18 item 2): the programs with loops, imported three ways, msa against the lifted
greedy-xla answer.

Views (``mallocgame.importers.hlo.parse_hlo_text``): ``expanded`` (the default: the body once per iteration, a fresh
buffer for every value an iteration computes), ``expanded-alias`` (``loop_state="alias"``: each loop-carried value
one buffer across the loop, as XLA's while aliasing makes it), ``once-alias`` (``max_expanded_ops=1`` as well: the
body imported once, costs scaled by the trip count, the carried values live across it: the flattened schedule XLA's
memory-space assignment works on). Each view is built as the ``xla`` suite builds its entries (capacity
``XLA_CAPACITY_FRACTION`` of its max live, tpuv4i; the ``expanded`` rows are the suite's programs) and read in prefetch
mode. Per view: buffers, max live, the solve session's baselines (the lifted greedy-xla answer, ``msa`` (no
cross-program prefetch), ``msa+cross-program-prefetch`` (XLA's one), ``msa+memory-overlap`` (XLA's per-memory overlap
rule) and ``msa+overlap-100`` (stays up to 100 copy times), each built without a deadline), and the ratios of msa and
of the best of its four configurations to the lifted answer. Values of different views are not comparable (their
buffers and op costs differ); the ratios are::

    nice python experiments/loop_views.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import Transcript, fenced, write_results

from mallocgame.engine.session import session_for
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import XLA_CAPACITY_FRACTION, _xla_dir, read_hlo_file
from mallocgame.inputs.workloads import with_capacity
from mallocgame.problem.intervals import max_live

VIEWS = (("expanded", {}), ("expanded-alias", {"loop_state": "alias"}),
         ("once-alias", {"loop_state": "alias", "max_expanded_ops": 1}))
PROGRAMS = ("xla:lstm2-scan128-train.hlo.txt", "xla:lstm3-scan150-train.hlo.txt", "tests:transformer_scan_fwd.hlo.txt")
MSAS = ("msa", "msa+cross-program-prefetch", "msa+memory-overlap", "msa+overlap-100")  # session baselines


def _path(spec: str) -> Path:
    where, name = spec.split(":", 1)
    return _xla_dir() / name if where == "xla" else Path(__file__).resolve().parents[1] / "tests" / "data" / name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--out", default="loop_views.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':22s} {'view':15s} {'buffers':>7s} {'max live':>11s} {'lifted gx':>10s} {'msa':>10s} "
        f"{'msa+cpp1':>10s} {'msa+mem':>10s} {'msa+r100':>10s} {'msa/lift':>8s} {'best/lift':>9s} {'s':>5s}")
    for spec in args.programs.split(","):
        for view, opts in VIEWS:
            t = time.monotonic()
            workload = read_hlo_file(_path(spec), **opts)  # as the suite reads its entries: in-place pairs merged
            problem, _ = prepare(with_capacity(workload, XLA_CAPACITY_FRACTION), mode="prefetch")  # as prefetch_programs()
            session = session_for(problem, problem.hardware)
            lifted = session.baseline("greedy-xla").objective
            msas = [session.baseline(name).objective for name in MSAS]
            name = spec.split(":", 1)[1].split(".")[0]
            ratios = [v / lifted if lifted > 0 else float("nan") for v in (msas[0], max(msas))]
            out(f"{name:22s} {view:15s} {problem.n:7d} {max_live(problem):11d} {lifted:10.4g} "
                + " ".join(f"{v:10.4g}" for v in msas)
                + f" {ratios[0]:8.3f} {ratios[1]:9.3f} {time.monotonic() - t:5.1f}")
    write_results(args.out, "# While loops as XLA sees them: three imports of the programs with loops\n\n"
                  "Prefetch mode, each view built as the xla suite builds its entries; msa and three of its configurations "
                  "against the lifted greedy-xla answer (experiments/loop_views.py's docstring).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
