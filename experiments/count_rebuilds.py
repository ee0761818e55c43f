"""Count how often the derived facts of one problem are built during one ``mallocgame solve`` (issue 17).

Wraps ``msa_run``, the greedy (``xla_order`` + ``greedy_place`` as greedy-xla's answer: counted at
``xla_order``), ``prefetch_upper_bound``, ``map_upper_bound``, ``judge``, ``max_live`` and the
evaluators' and overlap index's constructors, then runs the CLI's ``solve`` in this process
(its solver children are forks, so every process appends to one log: counts are per solve,
over all its processes). Usage::

    python experiments/count_rebuilds.py example:layered150 --mode prefetch --solver portfolio
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter

LOG = tempfile.NamedTemporaryFile(prefix="rebuilds.", suffix=".log", delete=False).name


def _caller() -> str:
    """`` <- module:function`` of the caller's caller when ``COUNT_CALLERS`` is set, else empty."""
    if not os.environ.get("COUNT_CALLERS"):
        return ""
    import traceback

    frame = traceback.extract_stack()[-4]
    return f" <- {os.path.basename(frame.filename)}:{frame.name}"


def _wrap(module, attr: str, label: str) -> None:
    original = getattr(module, attr)

    def counted(*args, **kwargs):
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {label}{_caller()}\n")
        return original(*args, **kwargs)

    counted.__wrapped__ = original
    setattr(module, attr, counted)
    for mod in list(sys.modules.values()):  # modules that bound it with `from ... import`
        if mod is not None and getattr(mod, attr, None) is original:
            setattr(mod, attr, counted)


def _wrap_init(cls, label: str) -> None:
    original = cls.__init__

    def counted(self, *args, **kwargs):
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {label}\n")
        original(self, *args, **kwargs)

    cls.__init__ = counted


def install() -> None:
    import mallocgame.algorithms.memory_space_assignment as msa
    import mallocgame.algorithms.placement as placement
    import mallocgame.bounds.bounds as bounds
    import mallocgame.cli.solve  # noqa: F401  (everything the solve command binds at import)
    import mallocgame.engine.comparison  # noqa: F401
    import mallocgame.engine.report as verdict
    import mallocgame.engine.runner  # noqa: F401
    import mallocgame.hardware.evaluator as evaluator
    import mallocgame.hardware.prefetch_cost as prefetch_cost
    import mallocgame.problem.intervals as intervals

    for mod in ("mallocgame.hybrid.portfolio", "mallocgame.hybrid.lns", "mallocgame.hybrid.select_pack",
                "mallocgame.engine.solving", "mallocgame.solvers.msa", "mallocgame.solvers.greedy_xla",
                "mallocgame.solvers.best_fit", "mallocgame.solvers.cpsat.solver",
                "mallocgame.solvers.cpsat.prefetch_windows", "mallocgame.search.uct", "mallocgame.solvers.mcts"):
        __import__(mod)
    _wrap(msa, "msa_run", "msa_run")
    _wrap(placement, "xla_order", "greedy (xla_order)")
    _wrap(bounds, "prefetch_upper_bound", "prefetch_upper_bound")
    _wrap(bounds, "map_upper_bound", "map_upper_bound")
    _wrap(verdict, "judge", "judge")
    _wrap(intervals, "max_live", "max_live")
    _wrap(intervals, "max_live_of", "max_live_of")
    _wrap(intervals, "live_profile", "live_profile")
    _wrap_init(evaluator.Evaluator, "Evaluator()")
    _wrap_init(prefetch_cost.PrefetchEvaluator, "PrefetchEvaluator()")
    _wrap_init(intervals.OverlapIndex, "OverlapIndex()")


def main(argv: list[str]) -> None:
    install()
    from mallocgame.cli.main import main as cli

    sys.argv = ["mallocgame", "solve", *argv]
    try:
        cli()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    lines = open(LOG).read().split("\n")
    os.unlink(LOG)
    per = Counter(line.split(" ", 1)[1] for line in lines if line)
    procs = {}
    for line in lines:
        if line:
            pid, label = line.split(" ", 1)
            procs.setdefault(label, set()).add(pid)
    print(f"solve {' '.join(argv)} (exit {code}):", file=sys.stderr)
    for label in sorted(per):
        print(f"  {label:24s} {per[label]:3d} times in {len(procs[label])} process(es)", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
