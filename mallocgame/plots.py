"""Pictures of answers and comparisons (matplotlib, imported lazily, Agg canvas, no pyplot state).

* :func:`draw_allocation`: the allocation picture of one answer — each fast buffer a
  rectangle ``[start, end) x [offset, offset + size)`` coloured by buffer kind, the
  capacity as a dashed line, and the slow (HBM) buffers in a separate band below, one
  bar per buffer on first-fit tracks;
* :func:`plot_solution`: one answer to one file (``mallocgame plot``);
* :func:`plot_comparison`: what ``mallocgame compare --plot DIR`` writes — per input
  ``INPUT.alloc.png`` (one allocation per solver) and ``INPUT.anytime.png`` (value or
  peak over time per solver, bound dashed); overall ``speedups.png`` (speed-up over
  greedy-xla and over all-slow, per input and solver) and, for pack inputs,
  ``pack_gaps.png`` (peak over the max-live bound).
"""

from __future__ import annotations

import heapq
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from mallocgame.formats.io import atomic_output, output_folder
from mallocgame.problem.model import Problem
from mallocgame.problem.units import format_bytes

KIND_COLORS = {"activation": "#4C72B0", "weight": "#DD8452", "input": "#55A868", "output": "#C44E52",
               "scratch": "#8172B3"}
SOLVER_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
                 "#CCB974", "#64B5CD")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _byte_axis(ax, height: float) -> None:
    """Ticks at round numbers of MiB / KiB / bytes on the y axis of ``ax``."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    unit, name = (2**20, "MiB") if height >= 2**20 else (2**10, "KiB") if height >= 2**10 else (1, "B")
    raw = max(height / unit / 6, 1e-9)
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if unit == 1:
        step = max(1.0, np.ceil(step))
    ax.yaxis.set_major_locator(MultipleLocator(step * unit))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / unit:g} {name}"))


def slow_tracks(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """First-fit track of every interval (intervals on one track do not overlap), shape ``[k]``."""
    order = np.lexsort((end, start))
    track = np.zeros(len(start), np.int64)
    free: list[tuple[int, int]] = []  # (end time, track) of the tracks in use
    spare: list[int] = []
    used = 0
    for i in order.tolist():
        while free and free[0][0] <= start[i]:
            heapq.heappush(spare, heapq.heappop(free)[1])
        if spare:
            t = heapq.heappop(spare)
        else:
            t, used = used, used + 1
        track[i] = t
        heapq.heappush(free, (int(end[i]), t))
    return track


def kind_legend(fig, problem: Problem) -> None:
    """A legend of the buffer kinds present in ``problem``, above the figure's axes."""
    from matplotlib.patches import Patch

    kinds = {b.kind for b in problem.buffers}
    present = [k for k in KIND_COLORS if k in kinds]
    fig.legend(handles=[Patch(color=KIND_COLORS[k], label=k) for k in present], fontsize=8, ncols=len(present),
               loc="outside upper right", frameon=False)


def draw_allocation(ax_fast, ax_slow, problem: Problem, offsets: Sequence[int | None], *, title: str = "") -> None:
    """Fast buffers as rectangles on ``ax_fast``; slow ones on first-fit tracks on ``ax_slow``."""
    from matplotlib.collections import PolyCollection

    a = problem.arrays
    off = np.fromiter((-1 if o is None else o for o in offsets), np.int64, problem.n)
    fast = off >= 0
    kinds = [b.kind for b in problem.buffers]
    colors = np.array([KIND_COLORS.get(k, "#999999") for k in kinds])
    edge = "white" if fast.sum() <= 400 else "none"
    s, e, o, z = a.start[fast], a.end[fast], off[fast], a.size[fast]
    verts = np.stack([np.stack([s, o], 1), np.stack([e, o], 1), np.stack([e, o + z], 1), np.stack([s, o + z], 1)], 1)
    ax_fast.add_collection(PolyCollection(verts, facecolors=colors[fast], edgecolors=edge, linewidths=0.4))
    horizon = int(a.end.max()) if problem.n else 1
    t0 = int(a.start.min()) if problem.n else 0
    top = int((o + z).max()) if fast.any() else 0
    cap = problem.capacity
    height = max(cap or 0, top, 1)
    ax_fast.set_xlim(t0, horizon)
    ax_fast.set_ylim(0, height * 1.04)
    if cap is not None:
        ax_fast.axhline(cap, color="black", linestyle="--", linewidth=1.0)
        ax_fast.text(horizon, cap, "capacity ", va="bottom", ha="right", fontsize=7)
    _byte_axis(ax_fast, height)
    ax_fast.set_ylabel("fast-memory address", fontsize=8)
    ax_fast.tick_params(labelsize=7)
    if title:
        ax_fast.set_title(title, fontsize=9, loc="left")
    if ax_slow is not None:
        _slow_band(ax_slow, problem, ~fast, colors, "slow memory (HBM)")


def draw_intervals(ax_fast, ax_slow, problem: Problem, intervals: Sequence, *, title: str = "") -> None:
    """A prefetch answer: each fast interval as its occupied rectangle, the copy window (a prefetch in
    flight, ``[copy_start + 1, start)``) hatched and pale; buffers never fast on the slow band."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    a = problem.arrays
    colors = np.array([KIND_COLORS.get(b.kind, "#999999") for b in problem.buffers])
    placed = np.zeros(problem.n, np.int64) - 1  # draw_allocation's slow band: never-fast buffers only
    if len(intervals):
        placed[[iv.buffer for iv in intervals]] = 0
    draw_allocation(ax_fast, ax_slow, problem, [None] * problem.n, title=title)
    if ax_slow is not None:  # redraw the slow band with only the buffers that are never fast
        ax_slow.cla()
        _slow_band(ax_slow, problem, placed < 0, colors, "never in fast memory")
    def rect(s, e, o, z):
        return [(s, o), (e, o), (e, o + z), (s, o + z)]

    solid, solid_c, window, window_c = [], [], [], []
    for iv in intervals:
        z = int(a.size[iv.buffer])
        solid.append(rect(iv.start, iv.end, iv.offset, z))
        solid_c.append(colors[iv.buffer])
        if iv.copy_start is not None and iv.copy_start + 1 < iv.start:
            window.append(rect(iv.copy_start + 1, iv.start, iv.offset, z))
            window_c.append(colors[iv.buffer])
    edge = "white" if len(solid) <= 400 else "none"
    ax_fast.add_collection(PolyCollection(solid, facecolors=solid_c, edgecolors=edge, linewidths=0.4))
    if window:
        ax_fast.add_collection(PolyCollection(window, facecolors=window_c, alpha=0.35, hatch="///",
                                              edgecolors="black", linewidths=0.2))
    top = max((iv.offset + int(a.size[iv.buffer]) for iv in intervals), default=0)
    height = max(problem.capacity or 0, top, 1)
    ax_fast.set_ylim(0, height * 1.04)
    ax_fast.legend(handles=[Patch(facecolor="#bbbbbb", hatch="///", label="prefetch in flight")], fontsize=7,
                   loc="upper left", frameon=False)


def _slow_band(ax_slow, problem: Problem, slow: np.ndarray, colors: np.ndarray, label: str) -> None:
    """The buffers ``slow`` (bool ``[n]``) on first-fit tracks below the fast-memory picture."""
    from matplotlib.collections import PolyCollection

    a = problem.arrays
    horizon = int(a.end.max()) if problem.n else 1
    ax_slow.set_xlim(int(a.start.min()) if problem.n else 0, horizon)
    ax_slow.set_yticks([])
    ax_slow.tick_params(labelsize=7)
    ax_slow.set_xlabel("time (op index)", fontsize=8)
    ax_slow.set_ylabel("slow", fontsize=8)
    ax_slow.set_title(f"{label}: {int(slow.sum())} buffers, {format_bytes(int(a.size[slow].sum()))}",
                      fontsize=8, loc="left")
    if not slow.any():
        return
    tracks = slow_tracks(a.start[slow], a.end[slow])
    s, e = a.start[slow], a.end[slow]
    verts = np.stack([np.stack([s, tracks + 0.1], 1), np.stack([e, tracks + 0.1], 1),
                      np.stack([e, tracks + 0.9], 1), np.stack([s, tracks + 0.9], 1)], 1)
    ax_slow.add_collection(PolyCollection(verts, facecolors=colors[slow], edgecolors="none"))
    ax_slow.set_ylim(0, int(tracks.max()) + 1)


def plot_intervals(problem: Problem, intervals: Sequence, path: str | Path, *, title: str = "") -> Path:
    """Draw one prefetch answer (fast intervals with their copy windows + slow band) to ``path``."""
    fig = _figure(11, 5.2)
    ax_fast, ax_slow = fig.subplots(2, 1, sharex=True, height_ratios=[4, 1])
    draw_intervals(ax_fast, ax_slow, problem, intervals, title=title)
    kind_legend(fig, problem)
    return _save(fig, path)


def plot_solution(problem: Problem, offsets: Sequence[int | None], path: str | Path, *, title: str = "") -> Path:
    """Draw one answer (allocation + slow band) to ``path``."""
    if problem.mode == "pack" and all(o is not None for o in offsets):
        fig = _figure(11, 4.2)
        ax_fast, ax_slow = fig.subplots(), None
        ax_fast.set_xlabel("time (op index)", fontsize=8)
    else:
        fig = _figure(11, 5.2)
        ax_fast, ax_slow = fig.subplots(2, 1, sharex=True, height_ratios=[4, 1])
    draw_allocation(ax_fast, ax_slow, problem, offsets, title=title)
    kind_legend(fig, problem)
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    with atomic_output(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or "png")
    return path


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "input"


# ---------------------------------------------------------------------------- comparisons

def _answer_title(inp, row) -> str:
    rep = row.report
    if inp.problem.mode == "map":
        speed = "" if rep.speedup is None else f", {rep.speedup:.3f}x over all-slow"
        vs = row.extra.get("speedup_vs_greedy")
        vs = "" if vs is None else f", {vs:.3f}x over greedy-xla"
        return f"{row.solver}: {rep.placed}/{rep.total} fast{speed}{vs}"
    gap = "" if rep.gap is None else f" ({rep.gap:+.2%} vs max-live)"
    return f"{row.solver}: peak {format_bytes(rep.peak)}{gap}"


def plot_allocations(inp, rows: list, path: Path) -> Path:
    """One allocation panel (plus slow band) per solver answer to ``inp``; failed solvers listed below."""
    valid = [r for r in rows if r.valid]
    failed = [r for r in rows if not r.valid]
    pack = inp.problem.mode == "pack"  # every buffer is placed: no slow band
    per = (1,) if pack else (4, 1)
    ratios = [x for _ in valid for x in per] + ([0.35 * len(failed) + 0.2] if failed else [])
    fig = _figure(11, (2.6 if pack else 3.3) * len(valid) + (0.35 * len(failed) + 0.6 if failed else 0) + 0.4)
    axes = fig.subplots(len(ratios), 1, height_ratios=ratios, squeeze=False)[:, 0]
    cap = inp.problem.capacity
    cap_text = "" if not cap else f", capacity {format_bytes(cap)}"
    fig.suptitle(f"{inp.name}: {inp.problem.n} buffers, {inp.problem.mode} mode{cap_text}", fontsize=10,
                 x=0.01, ha="left")
    step = len(per)
    for k, r in enumerate(valid):
        ax_fast = axes[step * k]
        ax_slow = None if pack else axes[step * k + 1]
        draw_allocation(ax_fast, ax_slow, inp.problem, r.report.offsets, title=_answer_title(inp, r))
        if pack:
            ax_fast.set_xlabel("time (op index)" if k == len(valid) - 1 else "", fontsize=8)
        elif k < len(valid) - 1:
            ax_slow.set_xlabel("")
    if valid:
        kind_legend(fig, inp.problem)
    if failed:
        ax = axes[-1]
        ax.axis("off")
        lines = [f"{r.solver}: {r.status} - {(r.error or r.report.violation or 'no valid answer')[:150]}"
                 for r in failed]
        ax.text(0, 1, "no valid answer from\n" + "\n".join(lines), va="top", ha="left", fontsize=8,
                color="#C44E52", transform=ax.transAxes)
    return _save(fig, path)


def plot_anytime(inp, rows: list, path: Path) -> Path:
    """Value (map, higher is better) or peak (pack, lower is better) over seconds, per solver."""
    fig = _figure(7.5, 4.2)
    ax = fig.subplots()
    ops = inp.problem.has_ops
    scale = 1e6 if (ops and inp.problem.mode == "map") else 1.0
    valid = [(k, r) for k, r in enumerate(rows) if r.valid]
    right = max([max(r.report.seconds, 1e-3) for _, r in valid] + [1e-3]) * 1.5
    for k, r in valid:
        rep = r.report
        hist = sorted((max(t, 1e-3), v) for t, v in rep.history if v is not None)
        final = (max(rep.seconds, 1e-3), rep.objective)
        pts = hist + [final, (right, rep.objective)]
        color = SOLVER_COLORS[k % len(SOLVER_COLORS)]
        ax.step([p[0] for p in pts], [p[1] * scale for p in pts], where="post", color=color, linewidth=1.5,
                label=r.solver)
        ax.plot([final[0]], [final[1] * scale], "o", color=color, markersize=5)
    if inp.bound is not None:
        label = "bound (no-fragmentation)" if inp.problem.mode == "map" else "bound (max live)"
        ax.axhline(inp.bound.value * scale, color="black", linestyle="--", linewidth=1, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (log)", fontsize=9)
    if inp.problem.mode == "map":
        ax.set_ylabel("time saved vs all-slow (µs)" if ops else "value (sum of benefits)", fontsize=9)
    else:
        ax.set_ylabel("peak address (lower is better)", fontsize=9)
    ax.set_title(f"{inp.name}: anytime curves (dot = final validated answer)", fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _bar_groups(inputs: list, rows: list, mode: str):
    """The layout of grouped bars over the inputs of ``mode``: ``(names, solvers, table, x, width)``
    with ``table[(input, solver)]`` the row and ``x`` float ``[inputs]`` the group centres, or
    ``None`` when no input is in that mode."""
    names = [inp.name for inp in inputs if inp.problem.mode == mode]
    if not names:
        return None
    solvers = list(dict.fromkeys(r.solver for r in rows))
    table = {(r.input, r.solver): r for r in rows}
    return names, solvers, table, np.arange(len(names)), 0.8 / max(1, len(solvers))


def plot_speedups(inputs: list, rows: list, path: Path) -> Path | None:
    """Grouped bars per map input: speed-up over greedy-xla (top) and over all-slow (bottom)."""
    groups = _bar_groups(inputs, rows, "map")
    if groups is None:
        return None
    names, solvers, table, x, width = groups
    fig = _figure(max(7.0, 0.55 * len(names) * max(1, len(solvers)) ** 0.5 + 3), 7.0)
    ax_g, ax_s = fig.subplots(2, 1, sharex=True)
    for k, s in enumerate(solvers):
        vs_greedy = [table[(n, s)].extra.get("speedup_vs_greedy", np.nan) if (n, s) in table else np.nan
                     for n in names]
        vs_slow = [(table[(n, s)].report.speedup or np.nan) if (n, s) in table and table[(n, s)].valid else np.nan
                   for n in names]
        color = SOLVER_COLORS[k % len(SOLVER_COLORS)]
        pos = x - 0.4 + width * (k + 0.5)
        ax_g.bar(pos, np.nan_to_num(np.array(vs_greedy, float) - 1.0), width, bottom=1.0, color=color, label=s)
        ax_g.scatter(pos, vs_greedy, marker="_", s=120, color="black", linewidths=1, zorder=3)
        ax_s.bar(pos, np.array(vs_slow, float), width, color=color, label=s)
    ax_g.axhline(1.0, color="black", linewidth=0.8)
    ax_g.set_ylabel("speed-up over greedy-xla", fontsize=9)
    ax_g.set_title("estimated speed-up per input and solver (black tick = value; no tick = no valid answer)",
                   fontsize=10, loc="left")
    ax_g.legend(fontsize=8, ncols=min(len(solvers), 5))
    lo = min([v for r in rows for v in [r.extra.get("speedup_vs_greedy")] if v] + [1.0])
    hi = max([v for r in rows for v in [r.extra.get("speedup_vs_greedy")] if v] + [1.0])
    pad = max((hi - lo) * 0.1, 0.005)
    ax_g.set_ylim(lo - pad, hi + pad)
    ax_s.axhline(1.0, color="black", linewidth=0.8)
    ax_s.set_ylabel("speed-up over all-slow", fontsize=9)
    ax_s.set_xticks(x, names, rotation=40, ha="right", fontsize=8)
    for ax in (ax_g, ax_s):
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(labelsize=8)
    return _save(fig, path)


def plot_pack_gaps(inputs: list, rows: list, path: Path) -> Path | None:
    """Grouped bars per pack input: peak / max-live bound (1.0 = provably optimal)."""
    groups = _bar_groups(inputs, rows, "pack")
    if groups is None:
        return None
    names, solvers, table, x, width = groups
    by_input = {inp.name: inp for inp in inputs}
    fig = _figure(max(7.0, 0.5 * len(names) + 3), 4.2)
    ax = fig.subplots()
    for k, s in enumerate(solvers):
        ratio = []
        for n in names:
            r, b = table.get((n, s)), by_input[n].bound
            ratio.append(r.report.peak / b.value if r is not None and r.valid and b and b.value else np.nan)
        pos = x - 0.4 + width * (k + 0.5)
        ax.bar(pos, np.array(ratio) - 1.0, width, bottom=1.0, color=SOLVER_COLORS[k % len(SOLVER_COLORS)], label=s)
        ax.scatter(pos, ratio, marker="_", s=120, color="black", linewidths=1, zorder=3)
    caps = [by_input[n].problem.capacity / by_input[n].bound.value if by_input[n].problem.capacity and
            by_input[n].bound and by_input[n].bound.value else np.nan for n in names]
    ax.plot(x, caps, linestyle="none", marker="v", color="#C44E52", markersize=6, label="capacity / bound")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("peak / max-live bound", fontsize=9)
    ax.set_xticks(x, names, rotation=40, ha="right", fontsize=8)
    ax.set_title("pack mode: peak / max-live lower bound (black tick = value; none = no valid answer)", fontsize=10,
                 loc="left")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def plot_comparison(inputs: list, rows: list, out_dir: Path) -> list[Path]:
    """Every picture of a comparison into ``out_dir``; returns the paths written."""
    out_dir = output_folder(out_dir)
    written: list[Path] = []
    for inp in inputs:
        mine = [r for r in rows if r.input == inp.name]
        stem = safe_name(inp.name)
        written.append(plot_allocations(inp, mine, out_dir / f"{stem}.alloc.png"))
        written.append(plot_anytime(inp, mine, out_dir / f"{stem}.anytime.png"))
    for p in (plot_speedups(inputs, rows, out_dir / "speedups.png"), plot_pack_gaps(inputs, rows, out_dir / "pack_gaps.png")):
        if p is not None:
            written.append(p)
    return written


# ---------------------------------------------------------------------------- schedules

def plot_live_orders(profiles: Sequence[tuple[str, np.ndarray]], path: str | Path, *, title: str = "",
                     floor: int | None = None) -> Path:
    """Live bytes over time for several op orders of one program (``mallocgame schedule``).

    ``profiles`` are ``(label, live)`` pairs, ``live[t]`` the bytes live during step ``t``
    (:meth:`mallocgame.algorithms.scheduling.base.Lifetimes.profile`); each is drawn as a step line with its
    peak marked. ``floor`` (e.g. the parameters live the whole program) is drawn dotted.
    """
    fig = _figure(9, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    top = 1
    for k, (label, live) in enumerate(profiles):
        live = np.asarray(live, np.int64)
        steps = np.arange(len(live) + 1)
        color = SOLVER_COLORS[k % len(SOLVER_COLORS)]
        ax.stairs(live, steps, color=color, linewidth=1.6, label=f"{label} (peak {live.max() / 2**20:.2f} MiB)")
        t = int(np.argmax(live))
        ax.plot([t + 0.5], [live[t]], marker="v", color=color)
        top = max(top, int(live.max()))
    if floor:
        ax.axhline(floor, color="#8C8C8C", linestyle=":", linewidth=1, label="live for the whole program")
    ax.set_xlabel("op step")
    ax.set_ylabel("live bytes")
    ax.set_ylim(0, top * 1.08)
    _byte_axis(ax, top)
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return _save(fig, path)
