"""Where the prefetch headroom of a program is (issue 18 item 4): the per-op bound against the lifted map answer.

For one xla-suite program in prefetch mode at the suite's capacity, in this process:

1. select-pack's map answer (``--map-limit`` s) and the map bound: is the map answer map-optimal?
2. its lifted value, the per-op bound, and how much of the gap between them is the touches of the buffers the map
   answer leaves slow (the per-op relaxation serves a touch holding the buffer at that op only);
3. a ceiling estimate for answers made of *segments*: every buffer cut at each gap of at least ``--min-free`` ops
   between its touches where copy windows of ``--ratio`` x the copy time fit the op times (``--op-times``: the
   lifted answer's, or each op's slowest, which no answer's op exceeds, so that no window is longer than needed); each
   segment a buffer of its own (occupied from its copy start), select-pack in map mode on those buffers (copies
   cost nothing there, and do not compete for budget), then lifted back and scored by the prefetch evaluator
   (copies and stalls charged). Not a bound (the cut points are fixed, select-pack is a heuristic); it says how
   far re-choosing the segments that are fast can go before copies are paid for; the map bound on the segments
   says how far any choice of them could (a ceiling for answers made of these segments, copies free). ``--ratio``
   takes a comma list; below 1 a cut needs only that share of its copy hidden, the rest stalled but not charged
   (a ceiling for answers that stall, too)::

    nice python experiments/prefetch_headroom.py --entry lstm2-scan128-train --min-free 4 --ratio 1.0
    nice python experiments/prefetch_headroom.py --entry lstm2-scan128-train --min-free 1 --ratio 1,0.5,0.25 \
        --op-times slowest --out prefetch_headroom_lstm2_ceiling.md
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, fenced, write_results

import mallocgame
from mallocgame.bounds.bounds import map_upper_bound, prefetch_upper_bound
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem.model import Buffer, FastInterval, Op, Operand, Problem


def _cuts(problem, b: int, cum: np.ndarray, need: float, min_free: int) -> list[tuple[int, int, int | None]]:
    """Buffer ``b``'s segments ``(serving start, end, copy start)``; the first one's copy start is ``-2`` (lifted
    as :func:`lift_map_answer` lifts a whole-life stay)."""
    ops, reads, writes = (x.tolist() for x in problem.touches.of(b))
    segs, cur, cur_copy, lw, served_write = [], int(problem.arrays.start[b]), -2, -1, False
    for i in range(len(ops) - 1):
        o, nxt = ops[i], ops[i + 1]
        if writes[i]:
            lw, served_write = o, True
        if nxt - o - 1 < min_free:
            continue
        if writes[i + 1] and not reads[i + 1]:
            end1, copy, occ = o + 1, None, nxt
        else:
            end1 = o + 1
            if served_write:  # the eviction's window: slots lw+1 .. end1-1
                end1 = max(o + 1, int(np.searchsorted(cum, cum[lw + 1] + need)))
                if end1 > nxt:
                    continue
            copy = int(np.searchsorted(cum, cum[nxt] - need, side="right")) - 2  # slots copy+1 .. nxt-1
            if copy < max(lw, end1 - 1):
                continue
            occ = copy + 1
        if occ - end1 < min_free:
            continue
        segs.append((cur, end1, cur_copy))
        cur, cur_copy, served_write = nxt, copy, False
    segs.append((cur, int(problem.arrays.end[b]), cur_copy))
    return segs


def segment_problem(problem, budgets, *, ratio: float, min_free: int):
    """The map problem whose buffers are the segments, and each segment's ``(buffer, serving start, end, copy)``."""
    cum = np.concatenate(([0.0], np.cumsum(budgets)))
    sizes = problem.arrays.size
    bufs, owner, starts = [], [], []
    for b, buf in enumerate(problem.buffers):
        segs = _cuts(problem, b, cum, ratio * float(sizes[b]) / problem.hardware.copy_bw, min_free)
        starts.append([s for s, _, _ in segs])
        for k, (s, e, c) in enumerate(segs):
            kind = buf.kind if (k == 0 or buf.kind not in ("input", "weight")) else "activation"
            kind = "activation" if kind == "output" and k < len(segs) - 1 else kind
            occ = s if c is None or c == -2 else c + 1
            bufs.append(Buffer(f"{buf.id}#{k}", buf.size, occ, e, None, buf.alignment, kind))
            owner.append((b, s, e, c))
    ops = []
    for t, op in enumerate(problem.ops):
        operands = []
        for x in op.operands:
            b = problem.index[x.buffer]
            k = int(np.searchsorted(starts[b], t, side="right")) - 1
            operands.append(Operand(f"{x.buffer}#{k}", x.access, x.bytes))
        ops.append(Op(op.id, op.kind, op.flops, op.fixed_bytes, tuple(operands), op.transcendentals))
    return Problem(problem.name + "-segments", tuple(bufs), ops=tuple(ops), capacity=problem.capacity, mode="map",
                   hardware=problem.hardware), owner


def lift_segments(problem, owner, offsets) -> list[FastInterval]:
    out = []
    for (b, s, e, c), o in zip(owner, offsets):
        if o is None:
            continue
        if c == -2:  # the first segment: lifted like a whole-life stay (lift_map_answer's rule)
            ops, reads, writes = problem.touches.of(b)
            k = int(np.searchsorted(ops, s))
            c = None if k < len(ops) and ops[k] == s and writes[k] and not reads[k] else s - 1
        out.append(FastInterval(b, int(o), s, e, c))
    return out


def op_times(pev, lifted, which: str) -> np.ndarray:
    """The op times copy windows are counted in: the lifted answer's, or every op at its ``slowest`` (the all-slow
    time: no answer's op is slower, so no answer hides a copy in fewer ops than counted here, and no piece is
    resident for longer than a real answer's would be)."""
    return pev.op_times(lifted if which == "lifted" else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--entry", default="lstm2-scan128-train")
    ap.add_argument("--map-limit", type=float, default=60.0)
    ap.add_argument("--min-free", type=int, default=4)
    ap.add_argument("--ratio", default="1.0", help="copy windows as this share of the copy time (comma list)")
    ap.add_argument("--op-times", choices=("lifted", "slowest"), default="lifted",
                    help="count copy windows in the lifted answer's op times or in each op's slowest time")
    ap.add_argument("--out", default="prefetch_headroom_lstm2.md")
    args = ap.parse_args()
    entry = next(e for e in suite_entries(args.suite) if e.name == args.entry)
    problem, _ = prepare(entry.build(), mode="prefetch")
    hw, out = problem.hardware, Transcript()
    pev = PrefetchEvaluator.of(problem, hw)
    map_problem = problem.replace(mode="map")
    sp = mallocgame.solve(map_problem, "select-pack", time_limit=args.map_limit)
    out(f"{entry.name}: {problem.n} buffers, {len(problem.ops)} ops, capacity {problem.capacity} B")
    out(f"select-pack map value {sp.objective:.7g}; map bound {map_upper_bound(map_problem, hw, time_limit=60).value:.7g}")
    lifted = lift_map_answer(problem, sp.solution.offsets)
    per_op = prefetch_upper_bound(problem, hw).value
    slow = np.array([o is None for o in sp.solution.offsets])
    base = pev.base
    slow_delta = float(base.delta[slow[base.buf_of]].sum())
    out(f"lifted {pev.value(lifted):.7g}; per-op bound {per_op:.7g}; gap {per_op - pev.value(lifted):.4g}, of which "
        f"the slow buffers' touch deltas {slow_delta:.4g} ({int(slow.sum())} slow buffers, "
        f"{int(problem.arrays.size[slow].sum())} B)")
    times = op_times(pev, lifted, args.op_times)
    for ratio in (float(r) for r in args.ratio.split(",")):
        t = time.monotonic()
        seg_problem, owner = segment_problem(problem, times, ratio=ratio, min_free=args.min_free)
        seg = mallocgame.solve(seg_problem, "select-pack", time_limit=args.map_limit)
        answer = lift_segments(problem, owner, seg.solution.offsets)
        assert validate_intervals(problem, answer) is None
        out(f"segments (min free {args.min_free} ops, windows {ratio:g} x copy time at the {args.op_times} op "
            f"times): {seg_problem.n} segments; "
            f"select-pack map value on them {seg.objective:.7g} (x {seg.objective / pev.value(lifted):.3f} the lifted "
            f"answer); lifted back {pev.value(answer):.7g} with stalls {pev.breakdown(answer).stall:.3g} "
            f"({time.monotonic() - t:.0f} s)")
        seg_bound = map_upper_bound(seg_problem, hw, time_limit=args.map_limit)
        out(f"  map bound on these segments {seg_bound.value:.7g} (x {seg_bound.value / pev.value(lifted):.3f} the "
            f"lifted answer; {seg_bound.kind}, {seg_bound.seconds:.0f} s): no choice of them, copies free, does better")
    write_results(args.out, f"# Prefetch headroom of {entry.name}\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
