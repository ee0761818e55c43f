"""The prefetch game's greedy episode and clone, native engine, in-process: a probe for comparing two builds.

For each named program of the xla suite (prefetch mode, 25% of max live, ``GameConfig(variant="prefetch",
order="xla")``, as experiments/bench_engine.py builds them): CPU seconds (``time.process_time``) of
``greedy_rollout()`` on a fresh clone, least and median of ``--repeat``, and microseconds per ``clone()`` of a
state half-way through a greedy episode (least of five batches of 2,000), with the episode's value (so that two
builds can be seen to give the same answer). It measures whatever ``mallocgame`` the path imports; with
``--trees A B`` it runs itself once per tree (``PYTHONPATH`` set to it, each tree's own compiled module),
alternating for ``--rounds`` rounds, so that two builds are compared side by side under the same load, and
writes what they printed to ``--out``.

Usage: nice python experiments/probe_prefetch_rollout.py [--programs a,b] [--repeat 5]
       [--trees BEFORE AFTER --rounds 2 --out prefetch_rollout_before_after.md]
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, add_tree_arguments, run_in_trees, write_results

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.inputs.workloads import with_capacity
from mallocgame.search.game import GameConfig
from mallocgame.search.game_prefetch import NativePrefetchGame, PrefetchData

HW = PRESETS["tpuv4i"]
CONFIG = GameConfig(variant="prefetch", order="xla")
DEFAULT_PROGRAMS = "gpt2-small-train-adam,lstm2-scan128-train,lstm3-scan150-train,gpt2-medium-train-adam"


def probe(problem, repeat: int) -> tuple[float, float, float, int, float]:
    """``(least s, median s, clone us, steps, value)`` of ``problem``'s greedy episode (native engine)."""
    fresh = NativePrefetchGame(problem, HW, CONFIG, data=PrefetchData(problem, HW))
    times, value, steps = [], 0.0, 0
    for _ in range(repeat):
        game = fresh.clone()
        t = time.process_time()
        value = game.greedy_rollout()
        times.append(time.process_time() - t)
        steps = game.steps
    mid = fresh.clone()
    while mid.steps < mid.decisions_left and not mid.done:
        mid.step(mid.greedy_action())
    clone = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(2000):
            mid.clone()
        clone = min(clone, (time.process_time() - t) / 2000 * 1e6)
    times.sort()
    return times[0], times[len(times) // 2], clone, steps, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default=DEFAULT_PROGRAMS, help="xla-suite programs, comma-separated")
    ap.add_argument("--repeat", type=int, default=5, help="greedy episodes per program")
    add_tree_arguments(ap, out="prefetch_rollout_before_after.md")
    args = ap.parse_args()
    if args.trees:
        compare(args)
        return
    names = args.programs.split(",")
    entries = {e.name: e for e in suite_entries("xla")}
    unknown = [n for n in names if n not in entries]
    if unknown:
        raise SystemExit(f"--programs: unknown program(s) {', '.join(unknown)} (known: {', '.join(entries)})")
    import mallocgame

    print(f"# {mallocgame.__file__}")
    for name in names:
        held = with_capacity(entries[name].build(), 0.25)
        problem = prepare(held, mode="prefetch", hardware=HW, capacity=held.capacity)[0]
        least, median, clone, steps, value = probe(problem, args.repeat)
        print(f"{name}: {steps} steps, greedy_rollout() least {least * 1e3:.1f} ms, median {median * 1e3:.1f} ms, "
              f"clone {clone:.2f} us, value {value!r}")


def compare(args) -> None:
    """Run this probe once per tree of ``args.trees``, alternating for ``args.rounds`` rounds; write the outputs."""
    show = Transcript()
    show("# The prefetch game's native greedy episode and clone: builds side by side")
    show()
    show(f"Trees: {', '.join(args.trees)}; one run per tree in turn, {args.rounds} rounds; CPU seconds, native engine.")
    run_in_trees(show, __file__, ["--programs", args.programs, "--repeat", str(args.repeat)], args.trees, args.rounds)
    write_results(args.out, show.text)


if __name__ == "__main__":
    main()
