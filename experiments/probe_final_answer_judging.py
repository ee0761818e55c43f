"""Who judges a forked solve's answers, and when: the parent (ahead, while the child runs) and the child (its report).

One ``solve_beside_bound`` (what ``mallocgame solve`` runs) of ``--solver`` on ``--workload`` in ``--mode``, with
``--time-limit``: every call of ``mallocgame.engine.report.judge`` is logged, in the parent and in the forked child,
with its answer's size and its start and end (seconds from the solve's start), beside the channel messages the parent
reads (an answer, the child's scoring of one, its return, its report). A final answer judged by both at once shows as
a parent judge of the child's answer overlapping the child's own. It measures whatever ``mallocgame`` the path
imports; with ``--trees A B`` it runs itself once per tree in turn (``--rounds``) and writes what they printed to
``--out``.

    nice python experiments/probe_final_answer_judging.py [--workload /tmp/scale3/layered-200000.json]
        [--mode prefetch] [--solver msa] [--time-limit 30] [--trees BEFORE AFTER --rounds 2 --out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from _common import Transcript, add_tree_arguments, run_in_trees, write_results


def probe(args) -> None:
    import mallocgame
    from mallocgame.engine import report as report_module
    from mallocgame.engine.solving import solve_beside_bound
    from mallocgame.inputs.load import prepare, read_problem
    from mallocgame.runtime import incumbents

    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # the child appends to it too
    parent = os.getpid()
    judge, take = report_module.judge, incumbents.Received.take

    def note(started: float, who: str, what: str) -> None:
        with open(log.name, "a") as fh:
            fh.write(f"{started:.6f} {time.monotonic():.6f} {who} {what}\n")

    def logged_judge(problem, hardware, answer, **kwargs):
        started = time.monotonic()
        verdict = judge(problem, hardware, answer, **kwargs)
        note(started, "parent" if os.getpid() == parent else "child", f"judges an answer of {len(answer)}")
        return verdict

    def logged_take(self, kind, payload):
        note(time.monotonic(), "parent", f"reads {kind}" + (f" {payload}" if kind == "scoring" else ""))
        return take(self, kind, payload)

    report_module.judge, incumbents.Received.take = logged_judge, logged_take
    problem, spec = prepare(read_problem(args.workload), mode=args.mode)
    t0 = time.monotonic()
    report = solve_beside_bound(args.solver, problem, spec, time_limit=args.time_limit, seed=0)
    total = time.monotonic() - t0
    with open(log.name) as fh:
        events = sorted((line.split(" ", 3) for line in fh.read().splitlines()), key=lambda e: float(e[0]))
    os.unlink(log.name)
    print(f"# {mallocgame.__file__}")
    print(f"{report.summary(has_ops=problem.has_ops)}; the solve {total:.2f} s, load average {os.getloadavg()[0]:.1f}")
    for started, ended, who, what in events:
        span = f"{float(started) - t0:.3f}" + ("" if who == "parent" and what.startswith("reads") else
                                               f" to {float(ended) - t0:.3f}")
        print(f"{span} s: {who} {what}")
    judged = [(who, what) for _, _, who, what in events if what.startswith("judges") and not what.endswith(" of 0")]
    print(f"answers of more than 0 judged: parent {sum(w == 'parent' for w, _ in judged)}, "
          f"child {sum(w == 'child' for w, _ in judged)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="/tmp/scale3/layered-200000.json")
    ap.add_argument("--mode", default="prefetch", choices=("map", "pack", "prefetch"))
    ap.add_argument("--solver", default="msa")
    ap.add_argument("--time-limit", type=float, default=30.0)
    add_tree_arguments(ap, out="final_answer_judging_200k.md")
    args = ap.parse_args()
    if not args.trees:
        probe(args)
        return
    show = Transcript()
    show("# Who judges a forked solve's answers: builds side by side")
    show()
    show(f"Trees: {', '.join(args.trees)}; one run per tree in turn, {args.rounds} rounds; {args.solver} on "
         f"`{os.path.basename(args.workload)}` in {args.mode} mode, limit {args.time_limit:g} s.")
    run_in_trees(show, __file__, ["--workload", args.workload, "--mode", args.mode, "--solver", args.solver,
                                  "--time-limit", str(args.time_limit)], args.trees, args.rounds)
    write_results(args.out, show.text)


if __name__ == "__main__":
    main()
