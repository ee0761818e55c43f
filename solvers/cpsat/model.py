"""CP-SAT model of one placement sub-problem, shared by the cpsat solver and the hybrids (docs/architecture.md, "Solvers").

A *part* is a set of buffers to decide plus already-placed fixed rectangles it must avoid (LNS
keeps most of an incumbent fixed). The model divides every byte count by a common unit, puts one
``AddNoOverlap`` per maximal clique of the part's interference graph (:func:`mallocgame.problem.graph.conflicts`), plus
the knapsack rows in map mode, ``AddNoOverlap2D`` and a cumulative in pack mode, searches bottom-up, and
maximises the evaluator's exact roofline saving in map mode. Variables, constraints, search, objective and determinism:
docs/cpsat.md, "The placement model".
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame.algorithms.packing_model import add_cumulative, add_no_overlap, add_rectangles
from mallocgame.problem.graph import conflicts as problem_conflicts
from mallocgame.problem.model import Problem, Status

OBJECTIVE_UNITS = 2**30


# ---------------------------------------------------------------- data helpers


def common_unit(*values: Any) -> int:
    """Greatest common divisor of every positive integer in ``values`` (ints or int arrays); 0 if none."""
    g = 0
    for v in values:
        if v is None:
            continue
        arr = np.atleast_1d(np.asarray(v, dtype=np.int64))
        arr = arr[arr > 0]
        if len(arr):
            g = math.gcd(g, int(np.gcd.reduce(arr)))
    return g


def grid_unit(sizes: np.ndarray, alignments: np.ndarray, *addresses: Any) -> int:
    """The address unit of the model: pushed-down placements put every offset on its multiples.

    Start from the gcd of the sizes and of the given fixed ``addresses``; an alignment
    that neither divides the unit nor is a multiple of it shrinks the unit to their gcd
    (repeat until stable). Capacities need not divide it: tops are multiples of the unit,
    so ``capacity // unit`` loses nothing.
    """
    unit = common_unit(sizes, *addresses) or 1
    aligns = np.unique(np.asarray(alignments, np.int64))
    while True:
        bad = aligns[(aligns % unit != 0) & (unit % aligns != 0)]
        if not len(bad):
            return unit
        unit = math.gcd(unit, int(np.gcd.reduce(bad)))


# ---------------------------------------------------------------- value terms


@dataclass(frozen=True)
class ValueTerms:
    """Map-mode value of the free buffers of a part, in seconds (or benefit units).

    Additive part: ``weights[j]`` per free buffer, shape ``[m]``. Linear roofline part
    (``ops`` non-empty): every op whose saving can saturate contributes
    ``min(cap, sum_j delta_j * fast_j)`` with ``(cap, js, deltas)`` per op; the ops that
    cannot saturate are folded into ``weights``.
    """

    weights: np.ndarray  # float64 [m]
    ops: tuple[tuple[float, np.ndarray, np.ndarray], ...] = ()

    @property
    def total(self) -> float:
        return float(self.weights.sum() + sum(cap for cap, _, _ in self.ops))

    def value(self, fast: np.ndarray) -> float:
        """Value of a choice ``fast`` (bool ``[m]``)."""
        v = float(self.weights[fast].sum())
        for cap, js, ds in self.ops:
            v += min(cap, float(ds[fast[js]].sum()))
        return v

    def signature(self, j: int) -> tuple:
        """What buffer ``j`` contributes, for symmetry detection."""
        per_op = tuple((k, float(ds[js == j].sum())) for k, (_, js, ds) in enumerate(self.ops) if (js == j).any())
        return (float(self.weights[j]), per_op)


def value_terms(evaluator, free: np.ndarray, fast_fixed: np.ndarray | None = None) -> ValueTerms:
    """The value terms of buffers ``free`` ([m] indices) given the other fast buffers ``fast_fixed`` (bool [n]).

    For workloads with ops this is exact: op ``t``'s time is
    ``max(compute_t, slow_mem_t - sum of deltas of fast operands)``, so the saving left
    to the free buffers is capped by ``slow_mem_t - compute_t - saved_by_fixed_t``.
    """
    m = len(free)
    if evaluator.additive:
        return ValueTerms(np.maximum(evaluator.benefits[free], 0.0))
    n = evaluator.problem.n
    local = np.full(n, -1, np.int64)
    local[free] = np.arange(m)
    rows = np.flatnonzero(local[evaluator.buf_of] >= 0)
    if fast_fixed is None:
        fast_fixed = np.zeros(n, bool)
    fixed_fast_rows = fast_fixed[evaluator.buf_of] & (local[evaluator.buf_of] < 0)
    saved_fixed = np.bincount(evaluator.op_of[fixed_fast_rows], evaluator.delta[fixed_fast_rows],
                              minlength=evaluator.n_ops)
    headroom = np.maximum(evaluator.slow_mem - evaluator.compute - saved_fixed, 0.0)
    weights = np.zeros(m)
    ops = []
    op_rows = evaluator.op_of[rows]
    order = np.argsort(op_rows, kind="stable")
    rows, op_rows = rows[order], op_rows[order]
    bounds = np.flatnonzero(np.diff(op_rows)) + 1
    for chunk in np.split(rows, bounds) if len(rows) else []:
        t = int(evaluator.op_of[chunk[0]])
        cap = float(headroom[t])
        if cap <= 0:
            continue
        js, ds = local[evaluator.buf_of[chunk]], evaluator.delta[chunk]
        if ds.sum() <= cap:  # cannot saturate: additive
            np.add.at(weights, js, ds)
        else:
            ops.append((cap, js, ds))
    return ValueTerms(weights, tuple(ops))


# ---------------------------------------------------------------- the part and its result


@dataclass(frozen=True)
class Part:
    """One sub-problem for CP-SAT (all numbers in bytes; scaling happens inside).

    ``free``: buffer indices ``[m]`` to decide, at or above ``offset_floor``. ``goal``: ``"feasible"`` (pack, within
    ``capacity``), ``"peak"`` (pack, minimise the highest address, never below
    ``peak_floor``, never above ``peak_ceiling``) or ``"value"`` (map, optional
    buffers, maximise ``terms``). ``fixed_*`` (shape ``[k]``): rectangles already placed,
    time ``[start, end)`` x address ``[lo, hi)``. ``hint``: offsets ``[m]`` (-1 slow)
    of a solution CP-SAT should try first.
    """

    free: np.ndarray
    goal: str
    capacity: int | None = None
    terms: ValueTerms | None = None
    fixed_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fixed_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fixed_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fixed_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    hint: np.ndarray | None = None
    peak_floor: int = 0
    peak_ceiling: int | None = None
    offset_floor: int = 0  # no free buffer goes below this address (an LNS band)


@dataclass(frozen=True)
class Limits:
    """How long and how CP-SAT searches: seconds, absolute monotonic deadline, seed, workers."""

    time_limit: float
    seed: int = 0
    workers: int = 2
    deterministic: bool = True
    dtime: float | None = None  # deterministic-time budget (CP-SAT work units)
    deadline: float | None = None


@dataclass(frozen=True)
class PartResult:
    """CP-SAT's answer for a part: offsets ``[m]`` (-1 slow) or None, in bytes."""

    status: Status
    offsets: np.ndarray | None
    objective: float | None  # value (map) or peak (pack), in the problem's units
    bound: float | None  # proven upper bound on the value (map) / lower bound on the peak (pack)
    history: tuple[tuple[float, float], ...] = ()
    stats: dict = field(default_factory=dict)


def _status_of(code: int) -> Status:
    from ortools.sat.python import cp_model

    return {cp_model.OPTIMAL: Status.OPTIMAL, cp_model.FEASIBLE: Status.FEASIBLE,
            cp_model.INFEASIBLE: Status.INFEASIBLE}.get(code, Status.UNKNOWN)


def _symmetry_groups(problem: Problem, part: Part) -> list[np.ndarray]:
    """Groups of local indices of interchangeable free buffers (same live range, size, alignment, value)."""
    a = problem.arrays
    f = part.free
    keys: dict[tuple, list[int]] = {}
    for j, (s, e, z, al) in enumerate(zip(a.start[f].tolist(), a.end[f].tolist(), a.size[f].tolist(),
                                          a.alignment[f].tolist())):
        keys.setdefault((s, e, z, al), []).append(j)
    groups = []
    for members in keys.values():
        if len(members) < 2:
            continue
        if part.goal == "value" and part.terms is not None:
            by_sig: dict[tuple, list[int]] = {}
            for j in members:
                by_sig.setdefault(part.terms.signature(j), []).append(j)
            groups.extend(np.array(g) for g in by_sig.values() if len(g) > 1)
        else:
            groups.append(np.array(members))
    return groups


def _canonical_hint(hint: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Reassign a hint inside each symmetry group so that it obeys the ordering constraints."""
    out = hint.copy()
    for g in groups:
        offs = np.sort(hint[g][hint[g] >= 0])
        out[g] = -1
        out[g[:len(offs)]] = offs
    return out


PACK_ORDERS = ("start", "length", "size", "area")
PACK_ORDER = "start"


def pack_branching_order(start: np.ndarray, end: np.ndarray, size: np.ndarray, name: str) -> np.ndarray:
    """Order in which the bottom-up worker takes buffers that could go equally low: ``[m]`` local indices.

    ``name`` is the primary key: ``start`` (earliest first), ``length`` (longest live
    range first), ``size`` (largest first) or ``area`` (size x length); the others break ties.
    """
    length = end - start
    keys = {"start": (-length, -size, start), "size": (start, -length, -size),
            "area": (start, -size, -(size * length)), "length": (start, -size, -length)}[name]
    return np.lexsort(keys)


# The no-overlap form per objective: the clique form alone in map mode, beside NoOverlap2D in pack mode
# (docs/results.md, "cpsat's defaults").
FORMULATION = {"value": "cliques", "feasible": "both", "peak": "both"}
PACK_STRATEGY = True
SMALL_MODEL = 40  # buffers


@dataclass(frozen=True)
class _PartData:
    """A part's data in CP-SAT units (one ``unit`` of bytes for every address quantity); local index ``j``."""

    m: int
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray          # bytes
    unit: int
    s_size: np.ndarray        # sizes in units
    s_align: np.ndarray       # alignments in units (at least 1)
    f_lo: np.ndarray          # fixed rectangles' address sides, in units
    f_hi: np.ndarray
    fixed_top: int
    top: int                  # the address domain's top (the capacity, or the peak's ceiling)
    floor: int                # the peak's floor (peak goal)
    ceiling: int              # the peak's ceiling (peak goal)
    optional: bool            # map mode: every buffer may stay slow
    hint: np.ndarray | None   # offsets in bytes, -1 slow; None: no usable hint
    weight_scale: float       # objective units per second saved (value goal)
    forced_out: np.ndarray    # worthless or too big: never fast
    groups: list


def _part_data(problem: Problem, part: Part) -> _PartData:
    a = problem.arrays
    free = np.asarray(part.free, np.int64)
    m = len(free)
    size, start, end, align = a.size[free], a.start[free], a.end[free], a.alignment[free]
    if part.goal == "value" and part.terms is None:
        raise ValueError("goal 'value' needs value terms")
    unit = grid_unit(size, align, part.fixed_lo, part.fixed_hi, part.offset_floor)
    s_size, s_align = size // unit, np.maximum(align // unit, 1)
    f_lo, f_hi = part.fixed_lo // unit, part.fixed_hi // unit
    fixed_top = int(f_hi.max()) if len(f_hi) else 0
    floor = ceiling = 0
    if part.goal == "peak":
        floor = max(-(-part.peak_floor // unit), 0)
        ceiling = (part.peak_ceiling // unit if part.peak_ceiling is not None else fixed_top + int(s_size.sum()))
        top = ceiling
    else:
        if part.capacity is None:
            raise ValueError(f"goal {part.goal!r} needs a capacity")
        top = part.capacity // unit
    optional = part.goal == "value"
    hint = None
    if part.hint is not None:
        hint = np.asarray(part.hint, np.int64)
        hint = np.where((hint >= part.offset_floor) & (hint % (s_align * unit) == 0) & (hint // unit + s_size <= top),
                        hint, -1)
        if not optional and (hint < 0).any():
            hint = None  # a pack hint must place everything; a partial one would mislead
    weight_scale = 0.0
    forced_out = np.zeros(m, bool)
    if optional:
        total = part.terms.total
        weight_scale = OBJECTIVE_UNITS / total if total > 0 else 0.0
        touched = part.terms.weights > 0
        for _, js, _ in part.terms.ops:
            touched[js] = True
        forced_out = ~touched | (s_size > top)
    groups = _symmetry_groups(problem, part)
    if hint is not None and groups:
        hint = _canonical_hint(hint, groups)
    return _PartData(m, start, end, size, unit, s_size, s_align, f_lo, f_hi, fixed_top, top, floor, ceiling,
                     optional, hint, weight_scale, forced_out, groups)


def _add_symmetry_breaking(model, d: _PartData, k_vars, present) -> None:
    """Interchangeable buffers: lower index lower address, and fast first."""
    for g in d.groups:
        for i, j in zip(g[:-1].tolist(), g[1:].tolist()):
            if k_vars[i] is None or k_vars[j] is None:
                continue
            ordered = model.add(k_vars[i] * int(d.s_align[i]) + int(d.s_size[i]) <= k_vars[j] * int(d.s_align[j]))
            if d.optional:
                ordered.only_enforce_if([present[i], present[j]])
                model.add_implication(present[j], present[i])


def _add_value_objective(model, d: _PartData, part: Part, present, cp_model) -> tuple[list, list]:
    """Map mode's objective, the exact roofline saving: a weight per fast buffer and ``min(cap, e)`` per op.

    Returns the saving variables and their hint values ``(var, value)`` under the hint."""
    expr, savings, saving_hints = [], [], []
    w_int = np.round(part.terms.weights * d.weight_scale).astype(np.int64)
    for j in range(d.m):
        if present[j] is not None and w_int[j] > 0:
            expr.append(int(w_int[j]) * present[j])
    for cap, js, ds in part.terms.ops:
        lits = [(int(round(delta * d.weight_scale)), j) for j, delta in zip(js.tolist(), ds.tolist())
                if present[j] is not None]
        if not lits:
            continue
        cap_int = int(round(cap * d.weight_scale))
        # s = min(cap, e) exactly, not just s <= both: a free s would let the search
        # creep up one objective unit per solution.
        e = model.new_int_var(0, sum(c for c, _ in lits), "")
        model.add(e == sum(c * present[j] for c, j in lits))
        s = model.new_int_var(0, cap_int, "")
        model.add_min_equality(s, [e, cap_int])
        expr.append(s)
        savings.append(s)
        if d.hint is not None:  # a complete hint is taken as is; a partial one may be lost
            e_hint = sum(c for c, j in lits if d.hint[j] >= 0)
            saving_hints += [(e, e_hint), (s, min(cap_int, e_hint))]
    model.maximize(sum(expr) if expr else 0)
    # Branch on savings at their largest value once the presences are set: left to
    # itself the search raises a free saving by one objective unit per solution.
    lits = [p for p in present if p is not None]
    if savings and lits:
        model.add_decision_strategy(lits, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
        model.add_decision_strategy(savings, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    return savings, saving_hints


def _add_hint(model, d: _PartData, k_vars, present, saving_hints, peak) -> None:
    for j in range(d.m):
        if k_vars[j] is None:
            continue
        on = d.hint[j] >= 0
        if d.optional:
            model.add_hint(present[j], bool(on))
        if on:
            model.add_hint(k_vars[j], int(d.hint[j] // d.unit // int(d.s_align[j])))
    for var, val in saving_hints:
        model.add_hint(var, val)
    if peak is not None:
        model.add_hint(peak, max(int(((d.hint // d.unit) + d.s_size).max()) if d.m else 0, d.fixed_top, d.floor))


def _parameters(solver, limits: Limits, d: _PartData, remaining: float, fixed_search: bool, cp_model) -> None:
    prm = solver.parameters
    prm.max_time_in_seconds = remaining
    # Parallel workers only pay off on models worth a portfolio; tiny ones run single-threaded.
    prm.num_workers = max(1, int(limits.workers)) if d.m >= SMALL_MODEL else 1
    prm.random_seed = int(limits.seed) % (2**31 - 1)
    if limits.deterministic and prm.num_workers > 1:
        prm.interleave_search = True
        # In interleaved mode (OR-Tools 9.15) the 'core' worker's task ignores the stop
        # signal and runs on to the time limit after the search is over.
        prm.ignore_subsolvers.append("core")
    if prm.num_workers == 1 and fixed_search:
        # One worker follows our strategy first (it is the multi-worker portfolio's
        # 'fixed' worker otherwise); measured several times faster on LNS windows.
        prm.search_branching = cp_model.PARTIAL_FIXED_SEARCH
    if limits.dtime is not None:
        prm.max_deterministic_time = max(float(limits.dtime), 1e-3)
    prm.log_search_progress = False


def _answer(solver, d: _PartData, part: Part, status: Status, k_vars, present, to_objective) -> PartResult:
    """The solved model's offsets in bytes, objective and bound (the caller adds history and stats)."""
    offsets = np.full(d.m, -1, np.int64)
    for j in range(d.m):
        if k_vars[j] is None:
            continue
        if d.optional and not solver.boolean_value(present[j]):
            continue
        offsets[j] = int(solver.value(k_vars[j])) * int(d.s_align[j]) * d.unit
    if part.goal == "peak":
        objective = float(max(int((offsets + d.size).max()) if d.m else 0, d.fixed_top * d.unit))
        bound = to_objective(solver.best_objective_bound)
    elif d.optional:
        objective = part.terms.value(offsets >= 0)
        bound = to_objective(solver.best_objective_bound) if status is not Status.OPTIMAL else objective
        bound = max(bound, objective)
    else:
        objective, bound = 0.0, 0.0
    return PartResult(status, offsets, objective, bound)


def solve_part(problem: Problem, part: Part, limits: Limits, *, t0: float | None = None,
               formulation: str | None = None, pack_order: str | None = None) -> PartResult:
    """Build the CP-SAT model of ``part``, solve it within ``limits`` and read the answer back in bytes.

    ``t0`` (monotonic seconds) is the origin of the history timestamps. Data, variables (the core's
    packing model, :mod:`mallocgame.algorithms.packing_model`), constraints, objective, search and hint, solve.
    """
    from ortools.sat.python import cp_model

    started = time.monotonic()
    t0 = started if t0 is None else t0
    formulation = formulation or FORMULATION[part.goal]
    d = _part_data(problem, part)
    m, n_fixed = d.m, len(d.f_lo)

    # Variables: the free buffers' rectangles, then the fixed ones (pinned, mandatory).
    model = cp_model.CpModel()
    rect = add_rectangles(
        model, np.concatenate([d.start, part.fixed_start]).astype(np.int64),
        np.concatenate([d.end, part.fixed_end]).astype(np.int64),
        np.concatenate([d.s_size, d.f_hi - d.f_lo]).astype(np.int64), top=d.top,
        align=np.concatenate([d.s_align, np.ones(n_fixed, np.int64)]),
        optional=np.concatenate([np.full(m, d.optional), np.zeros(n_fixed, bool)]), floor=part.offset_floor // d.unit,
        fixed_offsets=[None] * m + d.f_lo.tolist(),
        skip=np.concatenate([d.forced_out & d.optional, np.zeros(n_fixed, bool)]))
    k_vars, present = rect.steps[:m], rect.present[:m]
    if not d.optional and any(k is None for k in k_vars):  # a buffer that must be placed has no room
        j = next(j for j, k in enumerate(k_vars) if k is None)
        return PartResult(Status.INFEASIBLE, None, None, None, (), {"unit": d.unit, "empty_domain": j})
    cliques_of = None
    if n_fixed == 0:  # the part's cliques from the problem's interference graph (fixed rectangles are not in it)
        conflicts, free = problem_conflicts(problem), np.asarray(part.free, np.int64)
        cliques_of = lambda placed: conflicts.cliques_among(free[placed])  # noqa: E731
    peak, savings = _add_constraints_and_objective(model, d, part, rect, formulation, pack_order, cp_model,
                                                   cliques_of=cliques_of)

    # Solve.
    deadline = limits.deadline if limits.deadline is not None else started + limits.time_limit
    remaining = min(limits.time_limit, deadline - time.monotonic())
    if remaining <= 0.01:
        return PartResult(Status.UNKNOWN, None, None, None, (), {"unit": d.unit, "stopped_by": "time"})
    solver = cp_model.CpSolver()
    _parameters(solver, limits, d, remaining, bool(savings or (not d.optional and PACK_STRATEGY)), cp_model)
    if part.goal == "feasible":
        solver.parameters.stop_after_first_solution = True  # the interleaved search would go on looking
    return _solve_and_read(solver, model, d, part, k_vars, present, t0, cp_model)


def _add_constraints_and_objective(model, d: _PartData, part: Part, rect, formulation: str,
                                   pack_order: str | None, cp_model, *, cliques_of=None) -> tuple[Any, list]:
    """Constraints, objective, search strategy and hint of ``part``'s model on the variables ``rect``;
    returns the peak variable (goal ``peak``, else None) and the saving terms (map mode). ``cliques_of``:
    :func:`~mallocgame.algorithms.packing_model.add_no_overlap`'s."""
    m = d.m
    k_vars, present = rect.steps[:m], rect.present[:m]
    add_no_overlap(model, rect, formulation=formulation, knapsack_top=d.top if d.optional else None,
                   knapsack_always=True, cliques_of=cliques_of)
    peak = None
    if part.goal == "peak":
        peak = model.new_int_var(max(d.floor, d.fixed_top), max(d.ceiling, d.floor, d.fixed_top), "peak")
        for j in range(m):
            model.add(k_vars[j] * int(d.s_align[j]) + int(d.s_size[j]) <= peak)
        add_cumulative(model, rect, peak)
    else:
        add_cumulative(model, rect, d.top)
    _add_symmetry_breaking(model, d, k_vars, present)

    # Objective.
    savings, saving_hints = [], []
    if part.goal == "peak":
        model.minimize(peak)
    elif d.optional:
        savings, saving_hints = _add_value_objective(model, d, part, present, cp_model)

    # Search: in pack mode, a worker places buffers bottom-up (lowest possible offset first),
    # the canonical order of MiniMalloc-style searches; CP-SAT's other workers run as usual.
    if not d.optional and PACK_STRATEGY:
        order = pack_branching_order(d.start, d.end, d.size, pack_order or PACK_ORDER)
        model.add_decision_strategy([k_vars[j] for j in order.tolist()], cp_model.CHOOSE_LOWEST_MIN,
                                    cp_model.SELECT_MIN_VALUE)
    if d.hint is not None:
        _add_hint(model, d, k_vars, present, saving_hints, peak)
    return peak, savings


def _solve_and_read(solver, model, d: _PartData, part: Part, k_vars, present, t0: float, cp_model) -> PartResult:
    """Solve ``model`` (each solution in the history, timed from ``t0``) and read the answer back."""

    def to_objective(raw: float) -> float:
        if part.goal == "peak":
            return float(raw) * d.unit
        return float(raw) / d.weight_scale if d.weight_scale else 0.0

    history: list[tuple[float, float]] = []

    # Only records: calling stop_search() from a callback can crash OR-Tools 9.15 when the
    # first solution comes from presolve (a CHECK on the postsolve mapping).
    class Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            value = 0.0 if part.goal == "feasible" else to_objective(self.objective_value)
            history.append((time.monotonic() - t0, value))

    code = solver.solve(model, Recorder())
    status = _status_of(code)
    maximize = part.goal == "value"
    objective, best_bound = solver.objective_value, solver.best_objective_bound
    if (status is Status.FEASIBLE and part.goal != "feasible"
            and (objective >= best_bound - 0.5 if maximize else objective <= best_bound + 0.5)):
        status = Status.OPTIMAL  # the incumbent meets the proven bound
    stats = {"unit": d.unit, "cp_status": solver.status_name(code), "wall": round(solver.wall_time, 4),
             "dtime": round(solver.deterministic_time, 4), "conflicts": solver.num_conflicts,
             "branches": solver.num_branches, "variables": len(model.proto.variables),
             "constraints": len(model.proto.constraints)}
    if status not in (Status.OPTIMAL, Status.FEASIBLE):
        bound = to_objective(best_bound) if part.goal == "peak" and status is Status.UNKNOWN else None
        return PartResult(status, None, None, bound, tuple(history), stats)
    result = _answer(solver, d, part, status, k_vars, present, to_objective)
    return dataclasses.replace(result, history=tuple(history), stats=stats)
