"""The parent's seconds of one ``mallocgame solve``: before the solve, the solve (the child and, when it is stopped
at the limit, the validation of what it sent) and the outputs after it (report, solution CSV), wall and CPU.

Runs ``mallocgame solve ARGS`` in this process (the solver's child forks from it as usual) with a timer around
``solve_beside_bound``; the CPU seconds are this process's alone (not the child's). The line is printed to stderr
at exit. Compare two checkouts by running it with ``PYTHONPATH`` set to each:

    PYTHONPATH=CHECKOUT nice python experiments/probe_solve_parent.py solve FILE --solver best-fit --mode pack
        --time-limit 5 --minimize-peak --report R.json -o S.csv
"""

from __future__ import annotations

import atexit
import sys
import time


def main() -> None:
    from mallocgame.cli import solve as solve_module
    from mallocgame.cli.main import main as cli

    marks = {"start": (time.monotonic(), time.process_time())}
    inner = solve_module.solve_beside_bound

    def timed(*args, **kwargs):
        marks["call"] = (time.monotonic(), time.process_time())
        try:
            return inner(*args, **kwargs)
        finally:
            marks["return"] = (time.monotonic(), time.process_time())

    def said() -> None:
        if "return" not in marks:
            return
        end = (time.monotonic(), time.process_time())
        (s0, c0), (s1, c1), (s2, c2) = marks["start"], marks["call"], marks["return"]
        print(f"parent: before the solve wall {s1 - s0:.2f} s cpu {c1 - c0:.2f} s | the solve wall {s2 - s1:.2f} s "
              f"cpu {c2 - c1:.2f} s | outputs wall {end[0] - s2:.2f} s cpu {end[1] - c2:.2f} s",
              file=sys.stderr, flush=True)

    solve_module.solve_beside_bound = timed
    atexit.register(said)
    sys.argv = ["mallocgame", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
