"""While loops as XLA sees them (issue 18 item 2): the programs with loops, imported three ways, msa against the lifted
greedy-xla answer.

Views (``mallocgame.importers.hlo.parse_hlo_text``): ``expanded`` (the default: the body once per iteration, a fresh
buffer for every value an iteration computes), ``expanded-alias`` (``loop_state="alias"``: each loop-carried value
one buffer across the loop, as XLA's while aliasing makes it), ``once-alias`` (``max_expanded_ops=1`` as well: the
body imported once, costs scaled by the trip count, the carried values live across it: the flattened schedule XLA's
memory-space assignment works on). Per view, in prefetch mode at 25% of that view's max live on tpuv4i: buffers, max
live, the lifted greedy-xla answer, msa (XLA's defaults here: no cross-program prefetch), msa with XLA's one
cross-program prefetch, with XLA's per-memory overlap rule (``max_overlap="memory"``) and with stays up to 100 copy
times (``overlap_ratio=100``, the session's ``msa+overlap-100``), and the ratios of msa and of the best of the four
to the lifted answer. Values of different views are not comparable (their
buffers and op costs differ); the ratios are::

    nice python experiments/loop_views.py
"""

from __future__ import annotations

import argparse
import time
import warnings

from _common import Transcript, fenced, write_results

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.importers.hlo import HloImportWarning, import_hlo
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import _xla_dir
from mallocgame.intervals import max_live
from mallocgame.memory_space_assignment import msa_run
from mallocgame.session import session_for

VIEWS = (("expanded", {}), ("expanded-alias", {"loop_state": "alias"}),
         ("once-alias", {"loop_state": "alias", "max_expanded_ops": 1}))
PROGRAMS = ("xla:lstm2-scan128-train.hlo.txt", "xla:lstm3-scan150-train.hlo.txt", "tests:transformer_scan_fwd.hlo.txt")


def _path(spec: str):
    from pathlib import Path

    where, name = spec.split(":", 1)
    return _xla_dir() / name if where == "xla" else Path(__file__).resolve().parents[1] / "tests" / "data" / name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--out", default="loop_views.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'program':22s} {'view':15s} {'buffers':>7s} {'pairs':>5s} {'max live':>11s} {'lifted gx':>10s} {'msa':>10s} "
        f"{'msa+cpp1':>10s} {'msa+mem':>10s} {'msa+r100':>10s} {'msa/lift':>8s} {'best/lift':>9s} {'s':>5s}")
    for spec in args.programs.split(","):
        for view, opts in VIEWS:
            t = time.monotonic()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", HloImportWarning)  # the scaled body's warning is the point here
                raw = import_hlo(_path(spec), **opts)
            problem, _ = prepare(raw, mode="prefetch", capacity_fraction=0.25, hardware="tpuv4i")
            ev = PrefetchEvaluator.of(problem, problem.hardware)
            lifted = session_for(problem, problem.hardware).baseline("greedy-xla").objective
            msas = [ev.value(msa_run(problem, problem.hardware, float("inf"), **o)[0])
                    for o in ({}, {"cross_program_prefetch": 1}, {"max_overlap": "memory"}, {"overlap_ratio": 100.0})]
            name = spec.split(":", 1)[1].split(".")[0]
            ratios = [v / lifted if lifted > 0 else float("nan") for v in (msas[0], max(msas))]
            out(f"{name:22s} {view:15s} {problem.n:7d} {len(raw.inplace):5d} {max_live(problem):11d} {lifted:10.4g} "
                + " ".join(f"{v:10.4g}" for v in msas)
                + f" {ratios[0]:8.3f} {ratios[1]:9.3f} {time.monotonic() - t:5.1f}")
    write_results(args.out, "# While loops as XLA sees them: three imports of the programs with loops\n\n"
                  "Prefetch mode, 25% of each view's max live, tpuv4i; msa and three of its configurations "
                  "against the lifted greedy-xla answer (experiments/loop_views.py's docstring).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
