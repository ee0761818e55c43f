"""NN-guided MCTS (``muzero``) vs plain MCTS (``mcts``) at equal simulation budgets (paper claim 3).

Both solvers get the same number of simulations per move (``--solver-option
simulations=N``) and a time limit generous enough that the simulation budget, not the
clock, ends the search; the seed is the same. Inputs: the ``quick`` suite plus two
transformers of ``realistic``. Reports the value of each (speed-up over greedy-xla) and
which of the two is ahead per input.

Usage: nice python experiments/paper_muzero_vs_mcts.py [--simulations 16 64] [--time-limit 60] [--jobs 2] [--out PATH.md]
Writes experiments/results/paper_muzero_vs_mcts_simN.{csv,json} and paper_muzero_vs_mcts.md
(with --out: PATH.md and PATH_simN.{csv,json} beside it).
"""

from __future__ import annotations

import argparse

from _common import (
    fenced,
    fmt,
    machine_note,
    read_rows,
    registered_solvers,
    results_path,
    run_mallocgame,
    shown_path,
    stats_table,
    write_results,
)

INPUTS = ("quick", "realistic:encoder-small-b4,bert-base-b1")


def head_to_head(rows: list[dict[str, str]]) -> str:
    lines = ["| input | mcts x greedy | muzero x greedy | mcts s | muzero s | ahead |", "|---|---:|---:|---:|---:|---|"]
    wins = {"mcts": 0, "muzero": 0, "tie": 0}
    for name in dict.fromkeys(r["input"] for r in rows):
        rec = {r["solver"]: r for r in rows if r["input"] == name}
        a, b = rec.get("mcts"), rec.get("muzero")
        va = float(a["speedup_vs_greedy"]) if a and a["valid"] == "true" else None
        vb = float(b["speedup_vs_greedy"]) if b and b["valid"] == "true" else None
        if va is None and vb is None:
            ahead = "tie"
        elif vb is None or (va is not None and va > vb * (1 + 1e-6)):
            ahead = "mcts"
        elif va is None or vb > va * (1 + 1e-6):
            ahead = "muzero"
        else:
            ahead = "tie"
        wins[ahead] += 1
        lines.append(f"| {name} | {fmt(va)} | {fmt(vb)} | {fmt(float(a['seconds']) if a and a['seconds'] else None, '.2f')} | "
                     f"{fmt(float(b['seconds']) if b and b['seconds'] else None, '.2f')} | {ahead} |")
    lines.append(f"\nmuzero ahead on {wins['muzero']}, mcts ahead on {wins['mcts']}, tied on {wins['tie']}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulations", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="paper_muzero_vs_mcts.md",
                    help="results file (a bare name: under experiments/results/); compare's CSV/JSON go beside it")
    args = ap.parse_args()
    md = results_path(args.out)
    missing = [s for s in ("mcts", "muzero") if s not in registered_solvers()]
    if missing:
        raise SystemExit(f"not registered: {', '.join(missing)} (see `mallocgame solvers`); nothing to compare")
    sections = []
    for sims in args.simulations:
        out = md.with_name(f"{md.stem}_sim{sims}.csv")
        cmd, printed, seconds = run_mallocgame(["compare", *INPUTS, "--solvers", "greedy-xla,mcts,muzero",
                                                "--solver-option", f"simulations={sims}", "--time-limit",
                                                str(args.time_limit), "--jobs", str(args.jobs), "--out", shown_path(out),
                                                "--no-progress"])
        rows = read_rows(out)
        h2h = head_to_head(rows)
        print(h2h)
        sections.append(f"## {sims} simulations per move ({seconds:.0f} s)\n\n" + fenced(cmd) + "\n" + h2h + "\n"
                        + stats_table(rows, ["mcts", "muzero"]) + "\nWhat compare printed:\n\n" + fenced(printed))
    write_results(md, (
        "# NN-guided MCTS (muzero) vs plain MCTS (mcts) at equal simulation budgets\n\n"
        f"{machine_note()}\n\n" + "\n".join(sections)))


if __name__ == "__main__":
    main()
