"""Prefetch portfolio with the native engine (issue 39 item 4): the records of ``bench_prefetch_portfolio.py`` side by side.

Reads the record made before the native engine (``--old``, 60 s) and the records of today (``--runs``: label=file,
each a ``bench_prefetch_portfolio.py`` record) and prints, per program of the old record found in them: the old 60 s
portfolio value and its ratio to the best of msa and the lifted answers, each run's portfolio value and ratio, whether
each run reaches the old 60 s value (item 4: at 10 s), and the segment ceiling over the old best where a
``prefetch_headroom.py`` record exists (``bench_prefetch_portfolio.segment_ceiling``). Each record's load average is
listed under the table (the runs share the machine)::

    python experiments/prefetch_portfolio_native.py \\
        --runs before10=prefetch_portfolio_native_before_t10.md,before60=prefetch_portfolio_native_before_t60.md,\\
now10=prefetch_portfolio_native_t10.md,now60=prefetch_portfolio_native_t60.md
"""

from __future__ import annotations

import argparse
import re
import sys

from _common import Transcript, fenced, results_path, write_results
from bench_prefetch_portfolio import segment_ceiling


def fail(message: str) -> None:
    """Bad input: one line, exit status 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def rows_of(name: str) -> tuple[dict[str, tuple[float, float, float]], str]:
    """A bench record's ``{program: (best of msa and the lifted answers, portfolio, portfolio / best)}`` and its
    load average; exits with one line if the file is missing or has no rows."""
    path = results_path(name)
    if not path.is_file():
        fail(f"{path}: no such record")
    text = path.read_text()
    load = re.search(r"load average ([0-9. ]+)", text)
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        # a program's row: name, buffers, msa, lift gx, lift sp, portfolio, x best, ...
        if len(cells) >= 7 and cells[1].isdigit() and not line.startswith(" "):
            try:
                values = [float(c) for c in cells[2:7]]
            except ValueError:
                continue  # a cell "-" (no answer): no ratio to show
            pf, ratio = values[3], values[4]
            rows[cells[0]] = (pf / ratio if ratio else float("nan"), pf, ratio)
    if not rows:
        fail(f"{path}: no program rows (not a bench_prefetch_portfolio.py record?)")
    return rows, load.group(1).strip() if load else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", default="prefetch_portfolio_xla.md", help="the record before the native engine (60 s)")
    ap.add_argument("--runs", required=True, help="label=record,... of today's bench_prefetch_portfolio.py runs")
    ap.add_argument("--out", default="prefetch_portfolio_native.md")
    args = ap.parse_args()
    runs = []
    for item in filter(None, args.runs.split(",")):
        label, sep, name = item.partition("=")
        if not sep or not label or not name:
            fail(f"--runs: {item!r} is not label=record")
        runs.append((label, *rows_of(name), name))
    old, old_load = rows_of(args.old)
    out = Transcript()
    head = f"{'program':24s} {'old 60 s':>9s} {'x best':>7s}"
    for label, *_ in runs:
        head += f" {label:>9s} {'x best':>7s} {'reach':>5s}"
    out(head + f" {'ceil x':>7s}")
    for program, (best, pf, ratio) in old.items():
        if not any(program in rows for _, rows, _, _ in runs):
            continue
        line = f"{program:24s} {pf:9.4g} {ratio:7.3f}"
        for _, rows, _, _ in runs:
            if program in rows:
                _, now, now_ratio = rows[program]
                line += f" {now:9.4g} {now_ratio:7.3f} {'yes' if now >= pf else 'no':>5s}"
            else:
                line += f" {'-':>9s} {'-':>7s} {'-':>5s}"
        ceiling = segment_ceiling(program)
        out(line + (f" {ceiling[0] / best:7.3f}" if ceiling else f" {'-':>7s}"))
    out()
    out("old 60 s: the portfolio before the native engine; x best: over the best of msa and the lifted greedy-xla and")
    out("select-pack answers of the same run; reach: the run's portfolio value >= the old 60 s value; ceil x: the highest")
    out("segment ceiling of the program's prefetch_headroom records over the old best (-: no record).")
    out(f"load averages: old {old_load} ({args.old}); " + "; ".join(f"{label} {load} ({name})"
                                                               for label, _, load, name in runs))
    write_results(args.out, "# Prefetch portfolio with the native engine: today's runs beside the record before it\n\n"
                  + fenced(out.text))


if __name__ == "__main__":
    main()
