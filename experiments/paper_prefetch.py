"""Prefetch mode (XLA's real problem) against whole-lifetime placement, at several fast-memory sizes.

For each suite (``realistic``, ``matmul``) and capacity fraction F of each workload's max live bytes:

1. ``mallocgame compare SUITE --mode prefetch --solvers msa,...`` -- every prefetch solver, measured
   against ``msa`` (the re-implementation of XLA's memory-space assignment);
2. ``mallocgame compare SUITE --mode map --solvers greedy-xla,select-pack`` -- whole-lifetime placement;
3. each map answer lifted to prefetch mode (``mallocgame.formats.lift.lift_map_answer``: a parameter must
   be copied in before its first use, an output produced in fast memory copied out) and scored by
   the prefetch evaluator -- the fair whole-lifetime baseline. Map mode itself lets a fast
   parameter be resident before the program starts at no cost, so its time is optimistic.

The speed-up of prefetching = time of the best lifted map answer / time of the best prefetch answer.

Usage: nice python experiments/paper_prefetch.py [--time-limit 5] [--jobs 2] [--fractions 0.1 0.25 0.5]
       [--suites realistic matmul] [--solvers msa,cpsat,lns,mcts,portfolio] [--out paper_prefetch.md]
Writes experiments/results/paper_prefetch.md and compare's CSV/JSON beside it (NAME_SUITE_MODE_F.csv).
"""

from __future__ import annotations

import argparse
import json
import math

from _common import fenced, fmt, machine_note, read_rows, results_path, run_mallocgame, shown_path, write_results

MAP_SOLVERS = ("greedy-xla", "select-pack")


def lifted_times(json_path, suite: str, fraction: float) -> dict[tuple[str, str], float]:
    """``(input, solver) -> prefetch-mode time`` of every valid map answer in a compare JSON, lifted."""
    from mallocgame.engine.comparison import prepare_inputs
    from mallocgame.formats.lift import lift_map_answer
    from mallocgame.hardware.prefetch_cost import PrefetchEvaluator

    doc = json.loads(open(json_path).read())
    inputs = {inp.name: inp for inp in prepare_inputs([suite], benchmarks=None, mode="prefetch", capacity=None,
                                                       capacity_fraction=fraction, hardware=None)}
    out = {}
    for rec in doc["results"]:
        offsets = rec.get("offsets")
        if not offsets or rec["input"] not in inputs:
            continue
        inp = inputs[rec["input"]]
        answer = [offsets.get(b.id) for b in inp.problem.buffers]
        intervals = lift_map_answer(inp.problem, answer)
        out[(rec["input"], rec["solver"])] = PrefetchEvaluator.of(inp.problem, inp.hardware).time(intervals)
    return out


def summarise(pre: list[dict[str, str]], maps: list[dict[str, str]], lifted: dict, solvers: list[str]) -> str:
    by_input: dict[str, dict] = {}
    for r in pre:
        d = by_input.setdefault(r["input"], {"slow": float(r["time_all_slow"]) if r["time_all_slow"] else None})
        if r["valid"] == "true":
            d[r["solver"]] = float(r["estimated_time"])
    for r in maps:
        if r["valid"] == "true" and r["input"] in by_input:
            by_input[r["input"]]["map:" + r["solver"]] = float(r["estimated_time"])
    for (name, solver), t in lifted.items():
        if name in by_input:
            by_input[name]["lifted:" + solver] = t
    lines = ["| solver | valid | mean speed-up over all-slow | geo-mean vs msa | better / equal / worse vs msa |",
             "|---|---:|---:|---:|---|"]
    for s in solvers:
        got = [(d["slow"] / d[s], d["msa"] / d[s] if "msa" in d else None) for d in by_input.values() if s in d]
        vs = [v for _, v in got if v is not None]
        better = sum(v > 1 + 1e-6 for v in vs)
        worse = sum(v < 1 / (1 + 1e-6) for v in vs)
        geo = math.exp(sum(map(math.log, vs)) / len(vs)) if vs else None
        lines.append(f"| {s} | {len(got)}/{len(by_input)} | {fmt(sum(g for g, _ in got) / len(got) if got else None, '.3f')}"
                     f" | {fmt(geo)} | {better} / {len(vs) - better - worse} / {worse} |")
    for label, key in (("map mode (free residency, optimistic)", "map:"), ("map answer lifted to prefetch", "lifted:")):
        for m in MAP_SOLVERS:
            got = [d["slow"] / d[key + m] for d in by_input.values() if key + m in d and d[key + m] > 0]
            lines.append(f"| {m}, {label} | {len(got)}/{len(by_input)} | {fmt(sum(got) / len(got) if got else None, '.3f')}"
                         " | | |")
    gains = []
    for d in by_input.values():
        best_pre = min((d[s] for s in solvers if s in d), default=None)
        best_lift = min((d[k] for k in d if k.startswith("lifted:")), default=None)
        if best_pre and best_lift:
            gains.append(best_lift / best_pre)
    if gains:
        geo = math.exp(sum(map(math.log, gains)) / len(gains))
        lines.append(f"\nSpeed-up of prefetching over whole-lifetime placement (best lifted map answer / best prefetch "
                     f"answer, per input): geo-mean {geo:.3f}, min {min(gains):.3f}, max {max(gains):.3f} "
                     f"over {len(gains)} inputs.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    ap.add_argument("--suites", nargs="+", default=["realistic", "matmul"])
    ap.add_argument("--solvers", default="msa,cpsat,lns,mcts,portfolio",
                    help="prefetch-mode solvers (those that lack the mode show as n/a)")
    ap.add_argument("--out", default="paper_prefetch.md")
    args = ap.parse_args()
    md = results_path(args.out)
    solvers = args.solvers.split(",")
    common = ["--time-limit", str(args.time_limit), "--jobs", str(args.jobs), "--no-progress"]
    sections, outputs, total = [], [], 0.0
    for suite in args.suites:
        for f in args.fractions:
            pre_csv = md.with_name(f"{md.stem}_{suite}_prefetch_{f:g}.csv")
            map_csv = md.with_name(f"{md.stem}_{suite}_map_{f:g}.csv")
            cmd1, out1, s1 = run_mallocgame(["compare", suite, "--mode", "prefetch", "--solvers", ",".join(solvers),
                                             "--capacity-fraction", str(f), *common, "-o", shown_path(pre_csv)])
            cmd2, out2, s2 = run_mallocgame(["compare", suite, "--mode", "map", "--solvers", ",".join(MAP_SOLVERS),
                                             "--capacity-fraction", str(f), *common, "-o", shown_path(map_csv)])
            total += s1 + s2
            lifted = lifted_times(map_csv.with_suffix(".json"), suite, f)
            table = summarise(read_rows(pre_csv), read_rows(map_csv), lifted, solvers)
            print(table)
            sections.append(f"### {suite}, fast memory {f:.0%} of max live\n\n{table}")
            outputs.append(f"### {suite}, {f:.0%}: prefetch ({s1:.0f} s)\n\n" + fenced(cmd1) + "\n" + fenced(out1)
                           + f"\n### {suite}, {f:.0%}: map ({s2:.0f} s)\n\n" + fenced(cmd2) + "\n" + fenced(out2))
    write_results(md, (
        "# Prefetch mode against whole-lifetime placement\n\n"
        f"{machine_note()} {total:.0f} s in all.\n\n"
        "Speed-up over all-slow = time with every buffer in slow memory / time of the answer (prefetch-mode "
        "evaluator: op times plus copy stalls). 'vs msa' = msa's time / the solver's time on the same input.\n\n"
        "## Summary\n\n" + "\n".join(sections) + "\n## What compare printed\n\n" + "\n".join(outputs)))


if __name__ == "__main__":
    main()
