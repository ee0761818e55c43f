"""One solver called in this process on one workload file, as ``mallocgame solve`` runs it in its child: the phases'
seconds (load, the shared caches, the instant bound, the solver's declared imports, the solver, the scoring) and the
summary line. What a limit at scale is checked with in-process (no fork, no parent keeping the limit).

    nice python experiments/probe_solver_in_process.py FILE MODE SOLVER LIMIT [--profile]

Pack mode runs with ``minimize_peak`` (as experiments/bench_limits.py does). ``--profile``: cProfile of the solver's
``solve``, the 35 costliest calls by cumulative time.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import time


def main(argv: list[str]) -> int:
    from mallocgame.engine import runner
    from mallocgame.engine.registry import load_solver
    from mallocgame.inputs.load import prepare, read_problem

    path, mode, name, limit = argv[0], argv[1], argv[2], float(argv[3])
    profile = cProfile.Profile() if "--profile" in argv[4:] else None
    t = time.monotonic()
    problem, hardware = prepare(read_problem(path), mode=mode, minimize_peak=mode == "pack")
    gc.freeze()  # as solve does once the problem is read
    print(f"load {time.monotonic() - t:.2f}")
    t = time.monotonic()
    runner.shared_caches(problem, hardware)
    print(f"shared_caches {time.monotonic() - t:.2f}")
    t = time.monotonic()
    bound = runner.problem_bound(problem, hardware)
    print(f"bound {time.monotonic() - t:.2f}")
    solver = load_solver(name)
    t = time.monotonic()
    runner.preload(solver)
    print(f"preload {time.monotonic() - t:.2f}")
    t = time.monotonic()
    if profile:
        profile.enable()
    solution = solver.solve(solver.request(problem, hardware, time_limit=limit, seed=0))
    if profile:
        profile.disable()
    solved = time.monotonic() - t
    t = time.monotonic()
    report = runner.score(problem, hardware, solution, seconds=solved, bound=bound, solver_name=name)
    print(f"solve {solved:.2f} score {time.monotonic() - t:.2f}  {report.summary()}")
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
