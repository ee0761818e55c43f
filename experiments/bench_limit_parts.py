"""Side by side, in one process: the pieces of a command's time that a time limit at scale used to lose.

Each row times two ways of doing one thing on the same input, one after the other, so a busy machine slows
both alike:

* ``work units``: the size estimate that decides a search's held baselines (``mallocgame.engine.session.work_units``)
  counting the ops' (buffer, op) pairs from the operands, against building ``problem.touches`` (which map and
  pack modes never read otherwise) on a fresh copy of the problem; on ``layered_network(N, seed=0)``.
* ``validate one-op``: the validator on a valid answer of the one-op workload (one op writing N buffers, one
  reading them; every buffer stacked), against the sweep over time the validator ran past its pair limit before
  (its live buffers in one sorted Python list; copied here as ``plain_sweep``).
* ``HLO blank lines``: ``parse_hlo_module`` of a scheduled HLO header followed by M MiB of newlines (the
  uncompressed "bomb": refused with "no ENTRY computation"), against ``str.splitlines`` alone on the same text.

    nice python experiments/bench_limit_parts.py [--sizes 100000,200000] [--one-op 100000,500000] [--hlo-mib 255]
        [--out limit_parts.md]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path


def _timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def work_units_rows(n: int) -> list[str]:
    from mallocgame.engine.session import work_units
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.load import prepare
    from mallocgame.problem.model import derived_facts

    raw = layered_network(n, seed=0)
    problem, _ = prepare(raw, mode="pack", minimize_peak=True)
    other, _ = prepare(raw, mode="pack", minimize_peak=True)
    gc.freeze()
    counted, units = _timed(lambda: work_units(problem))
    built, touches = _timed(lambda: len(other.touches.ops))
    derived_facts(other).pop("work_units", None)
    same = work_units(other) == units
    return [f"| work units | layered-{n} | {problem.n} | {counted:.3f} | {built:.3f} | touches {touches:,}, "
            f"work units {units:,}, equal from the built touches: {same} |"]


def plain_sweep(problem, offsets) -> bool:
    """The validator's sweep over time as it was: the live buffers in one sorted Python list. Valid or not."""
    import bisect

    bufs = problem.buffers
    events = sorted(e for i, (b, off) in enumerate(zip(bufs, offsets)) if off is not None
                    for e in ((b.start, 1, i), (b.end, 0, i)))
    active: list[tuple[int, int, int]] = []
    for _, kind, i in events:
        item = (offsets[i], offsets[i] + bufs[i].size, i)
        if kind == 0:
            del active[bisect.bisect_left(active, item)]
            continue
        pos = bisect.bisect_left(active, item)
        if any(0 <= j < len(active) and active[j][0] < item[1] and item[0] < active[j][1] for j in (pos - 1, pos)):
            return False
        active.insert(pos, item)
    return True


def one_op_rows(n: int) -> list[str]:
    from mallocgame.hardware.validator import validate
    from mallocgame.problem.model import Buffer, Problem

    problem = Problem(f"one-op-{n}", tuple(Buffer(f"b{i}", 256 * (1 + i % 7), 0, 2, alignment=256)
                                           for i in range(n)), capacity=None, mode="pack")
    offsets, top = [], 0
    for b in reversed(problem.buffers):  # stacked from the last buffer: each insert lands before the others
        offsets.append(top)
        top += b.size
    offsets.reverse()
    gc.freeze()
    fast, verdict = _timed(lambda: validate(problem, offsets))
    sweep, swept = _timed(lambda: plain_sweep(problem, offsets))
    return [f"| validate one-op | one-op-{n} | {n} | {fast:.3f} | {sweep:.3f} | validate: {verdict or 'valid'}, "
            f"the plain sweep: {'valid' if swept else 'invalid'} |"]


def hlo_rows(mib: int) -> list[str]:
    from mallocgame.importers.hlo import parse_hlo_module
    from mallocgame.problem.model import InputError

    text = "HloModule bomb, is_scheduled=true\n" + "\n" * (mib << 20)

    def parse():
        try:
            parse_hlo_module(text, "bomb.hlo.txt")
        except InputError as exc:
            return str(exc)
        return "parsed"

    streamed, said = _timed(parse)
    split, lines = _timed(lambda: len(text.splitlines()))
    return [f"| HLO blank lines | {mib} MiB of newlines | {lines:,} lines | {streamed:.3f} | {split:.3f} | "
            f"parse: {said}; splitlines alone (no parsing) |"]


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,200000")
    ap.add_argument("--one-op", default="100000,500000")
    ap.add_argument("--hlo-mib", default="255")
    ap.add_argument("--out", default="limit_parts.md")
    args = ap.parse_args(argv)
    lines = ["# The pieces of a command's time a limit at scale used to lose, side by side", "",
             "Each row: the way the code does it now (`now s`) and the way it did (`before s`), timed one after "
             "the other in one process (experiments/bench_limit_parts.py says what each row runs).", "",
             "| piece | input | size | now s | before s | what |", "|---|---|---:|---:|---:|---|"]
    for rows in ([work_units_rows(int(n)) for n in args.sizes.split(",") if n]
                 + [one_op_rows(int(n)) for n in args.one_op.split(",") if n]
                 + [hlo_rows(int(m)) for m in args.hlo_mib.split(",") if m]):
        for row in rows:
            print(row, flush=True)
            lines.append(row)
    write_results(args.out, "\n".join(lines) + "\n", argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
