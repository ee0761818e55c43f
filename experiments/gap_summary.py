"""The gaps of a ``mallocgame compare`` CSV to its bounds, per input and their median (issue 18 item 5).

``gap`` is the gap to the reported (tighter) bound; in prefetch mode the CSV also holds the per-op
bound (``bound_per_op``), so both gaps are shown::

    python experiments/gap_summary.py experiments/out/realistic_prefetch_portfolio60.csv --out NAME.md
"""

from __future__ import annotations

import argparse
import statistics

from _common import Transcript, fenced, read_rows, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--solver", default=None, help="only this solver's rows")
    ap.add_argument("--out", default=None, help="also write a results file (experiments/results/NAME.md)")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'input':28s} {'solver':10s} {'value':>10s} {'bound':>10s} {'kind':>9s} {'gap':>7s} {'per-op':>10s} {'gap':>7s}")
    gaps, per_op_gaps = [], []
    for row in read_rows(args.csv):
        if args.solver and row["solver"] != args.solver or row["valid"] != "true":
            continue
        value, bound = float(row["value"]), float(row["bound"])
        gap = (bound - value) / bound if bound > 0 else 0.0
        per_op = float(row["bound_per_op"]) if row.get("bound_per_op") else None
        per_op_gap = (per_op - value) / per_op if per_op else None
        gaps.append(gap)
        if per_op_gap is not None:
            per_op_gaps.append(per_op_gap)
        out(f"{row['input']:28s} {row['solver']:10s} {value:10.4g} {bound:10.4g} {row.get('bound_kind') or '':>9s} "
            f"{gap:7.1%} {per_op if per_op is not None else float('nan'):10.4g} "
            f"{per_op_gap if per_op_gap is not None else float('nan'):7.1%}")
    out()
    out(f"median gap to the reported bound: {statistics.median(gaps):.1%} over {len(gaps)} rows"
        + (f"; to the per-op bound: {statistics.median(per_op_gaps):.1%}" if per_op_gaps else ""))
    if args.out:
        write_results(args.out, f"# Gaps to the bounds: {args.csv}\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
