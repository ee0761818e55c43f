"""mallocgame as ExecuTorch's memory planner (extra ``mallocgame[executorch]``).

ExecuTorch plans every non-constant tensor of a program into one arena per memory id
(``execution_plan[0].non_const_buffer_sizes``) with a pluggable algorithm:
``MemoryPlanningPass(memory_planning_algo=MemoryPlanningAlgorithmSuite(algo_list=[...]))`` calls
each algorithm as ``algo(alignment, specs, graph_module, graph_signature, extra_padding)`` and keeps
the one whose arenas sum smallest (the first on a tie). :func:`planner` returns such an algorithm:

- each spec (``TensorSpec``) is realigned to ``alignment`` (as ExecuTorch's ``greedy`` does) and
  becomes a buffer of ``allocated_memory`` bytes live on ``[lifetime[0], lifetime[1] + 1)``
  (ExecuTorch's lifetimes are inclusive node indices);
- specs are planned per memory id (``spec.mem_id``, 1 when unset), one pack-mode problem each, no
  capacity (minimise the peak), solved by a registered solver (``pack-search`` by default) through
  :func:`mallocgame.solve` with the time limit and seed, warm-started from ExecuTorch's own
  ``greedy`` plan of the same specs (so the arena is never larger than greedy's), and judged by
  :func:`mallocgame.engine.report.judge` (hardware.validator): an invalid answer raises
  :class:`PlanningError`, it is never handed to ExecuTorch;
- what ExecuTorch lets overlap: a storage-backed spec (``spec.storage_base``, an in-place op's
  result) is not planned, it is put at its base's offset plus ``storage_base_offset`` (its base's
  lifetime already covers it); zero-byte specs take the arena's first offset;
- ``graph_module.input_mem_buffer_sizes`` (the arenas reserved for control-flow submodules) is
  kept free at the bottom of each arena, rounded up to ``alignment`` (greedy does not round; the
  sizes ExecuTorch reserves are planned arenas, multiples of it already), and ``extra_padding``
  is added at its top, as greedy does;
- ``mem_obj_id`` is the index of the address range (the union of overlapping placements) a
  spec lies in, so specs that share storage share it, as ExecuTorch's verifier requires;
- ``allow_overlapping_allocations=False`` (Vulkan's shared objects, where every tensor of an
  object sits at its offset 0) is not a packing problem: it is handed to ExecuTorch's greedy.

Example (needs executorch)::

    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy
    from executorch.exir.passes import MemoryPlanningPass
    from mallocgame.integrations.executorch import planner

    suite = MemoryPlanningAlgorithmSuite(algo_list=[greedy, planner("pack-search", time_limit=5, seed=0)])
    program = to_edge(torch.export.export(model.eval(), (x,))).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo=suite)))
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import mallocgame
from mallocgame.engine.registry import solver_entries, solver_modes
from mallocgame.engine.report import judge
from mallocgame.inputs.load import prepare
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import Buffer, InputError, Problem, Solution, Status
from mallocgame.problem.suggest import did_you_mean


class PlanningError(RuntimeError):
    """The solver gave no valid plan (the validator's violation is in the message)."""


def _executorch():
    """ExecuTorch's ``memory_planning`` module, imported without its import-time log noise
    (torchao's optional CUDA kernels, pytree's deprecation notes); ``InputError`` when absent."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            from executorch.exir import memory_planning, to_edge  # noqa: F401
            from executorch.exir.passes import MemoryPlanningPass  # noqa: F401
    except ImportError as exc:
        raise InputError(f"executorch is not installed ({exc}): pip install 'mallocgame[executorch]'") from None
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    return memory_planning


@dataclass
class ArenaRecord:
    """One arena planned by a :class:`Planner` call: what it cost and how it went."""

    mem_id: int
    buffers: int  # specs planned as buffers (storage-backed and zero-byte ones aside)
    max_live: int  # the lower bound on the peak
    peak: int  # ours, without the reserved bottom and the padding
    greedy_peak: int  # ExecuTorch greedy's on the same specs (the warm start)
    status: str
    seconds: float  # our whole planning of this arena, greedy's warm start included
    reserved: int = 0  # input_mem_buffer_sizes (rounded up to the alignment)
    padding: int = 0


@dataclass
class Planner:
    """The ExecuTorch memory-planning algorithm of :func:`planner` (a callable)."""

    solver: str = "pack-search"
    time_limit: float = 10.0
    seed: int = 0
    warm_start_greedy: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    records: list[ArenaRecord] = field(default_factory=list)  # one per arena planned, every call appended

    @property
    def __name__(self) -> str:  # the suite keys its results by name; never "greedy"
        return f"mallocgame_{self.solver}"

    def __call__(self, alignment: int, specs, graph_module, graph_signature, extra_padding: int = 0, *,
                 allow_overlapping_allocations: bool = True):
        mp = _executorch()
        if not allow_overlapping_allocations:
            return mp.greedy(alignment, specs, graph_module, graph_signature, extra_padding,
                             allow_overlapping_allocations=False)
        specs = list(specs)  # the caller's order (ExecuTorch keeps it deterministic)
        result = mp.MemoryAlgoResult({}, [])
        for spec in specs:
            spec.realign(alignment)
            result.spec_dict[spec] = mp.SpecAllocResult(1 if spec.mem_id is None else spec.mem_id, 0, 0)
        hint = None
        if self.warm_start_greedy and specs:
            try:
                hint = mp.greedy(alignment, specs, graph_module, graph_signature, extra_padding).spec_dict
            except Exception:  # greedy's own failure: plan without its warm start (ours is still judged)
                hint = None
        reserved_sizes = list(getattr(graph_module, "input_mem_buffer_sizes", None) or [])
        plain = [s for s in specs if s.storage_base is None]
        mem_ids = sorted({result.spec_dict[s].mem_id for s in plain})
        if not mem_ids:
            if any(s.storage_base is not None for s in specs):
                raise PlanningError("every spec is storage-backed: no base to place them in")
            result.bufsizes = [0, 0]
            return result
        bufsizes = [0] * (max(mem_ids) + 1)
        for mem_id in mem_ids:
            group = [s for s in plain if result.spec_dict[s].mem_id == mem_id]
            reserved = reserved_sizes[mem_id] if mem_id < len(reserved_sizes) else 0
            base = -(-reserved // alignment) * alignment if alignment > 1 else reserved
            greedy_base = reserved  # greedy's offsets start right above the reserved bytes
            offsets, record = self._plan(group, alignment, mem_id, hint, greedy_base)
            record.reserved, record.padding = base, extra_padding
            self.records.append(record)
            for spec, off in zip(group, offsets):
                result.spec_dict[spec].mem_offset = base + off
            bufsizes[mem_id] = base + record.peak + extra_padding
        _place_storage_backed(specs, result)
        _number_objects(specs, result)
        result.bufsizes = bufsizes
        return result

    def _plan(self, group: Sequence[Any], alignment: int, mem_id: int, hint, greedy_base: int):
        t0 = time.perf_counter()
        sized = [(i, s) for i, s in enumerate(group) if s.allocated_memory > 0]
        offsets = [0] * len(group)
        if not sized:
            return offsets, ArenaRecord(mem_id, 0, 0, 0, 0, "OPTIMAL", time.perf_counter() - t0)
        horizon = max((int(s.lifetime[1]) for _, s in sized if s.lifetime[1] is not None), default=0) + 1
        buffers = []
        for i, s in sized:
            lo, hi = s.lifetime
            lo = 0 if lo is None else int(lo)
            hi = horizon if hi is None else int(hi) + 1  # inclusive -> half-open
            buffers.append(Buffer(f"t{i}", int(s.allocated_memory), lo, max(hi, lo + 1), alignment=max(1, alignment)))
        problem, _ = prepare(Problem(name=f"executorch.mem{mem_id}", buffers=tuple(buffers), mode="pack"), mode="pack")
        live = max_live(problem)
        start = None
        greedy_peak = 0
        if hint is not None and all(s in hint for _, s in sized):
            start = [int(hint[s].mem_offset) - greedy_base for _, s in sized]
            greedy_peak = max(o + b.size for o, b in zip(start, problem.buffers))
            if judge(problem, problem.hardware, start).violation is not None:
                start = None  # greedy's plan does not carry over (never seen): plan without it
        hint_solution = None if start is None else Solution(offsets=tuple(start), status=Status.FEASIBLE, mode="pack",
                                                            solver="executorch-greedy")
        result = mallocgame.solve(problem, self.solver, time_limit=self.time_limit, seed=self.seed,
                                  hint=hint_solution, **self.options)
        if not result.valid:
            raise PlanningError(f"{self.solver} found no plan for memory id {mem_id} ({len(buffers)} tensors): "
                                f"{result.status}")
        answer = list(result.solution.offsets)
        found = judge(problem, problem.hardware, answer)
        if found.violation is not None or any(o is None for o in answer):
            raise PlanningError(f"{self.solver}'s plan for memory id {mem_id} is invalid: "
                                f"{found.violation or 'a tensor left unplaced'}")
        for (i, _), off in zip(sized, answer):
            offsets[i] = int(off)
        return offsets, ArenaRecord(mem_id, len(buffers), int(live), int(found.peak), int(greedy_peak), result.status,
                                    time.perf_counter() - t0)


def _place_storage_backed(specs: Sequence[Any], result) -> None:
    """Storage-backed specs at their base's offset plus ``storage_base_offset`` (chains resolved)."""
    placed = {s for s in specs if s.storage_base is None}
    pending = [s for s in specs if s.storage_base is not None]
    while pending:
        rest = [s for s in pending if s.storage_base not in placed]
        for s in pending:
            if s.storage_base in placed:
                base = result.spec_dict[s.storage_base]
                mine = result.spec_dict[s]
                mine.mem_id = base.mem_id
                mine.mem_offset = base.mem_offset + int(s.storage_base_offset)
                if s.storage_base_offset + s.allocated_memory > s.storage_base.allocated_memory:
                    raise PlanningError("a storage-backed tensor does not fit in its base")
                placed.add(s)
        if len(rest) == len(pending):
            raise PlanningError("storage-backed tensors whose base is not planned (a cycle or a missing base)")
        pending = rest


def _number_objects(specs: Sequence[Any], result) -> None:
    """``mem_obj_id``: per memory id, the index of the merged address range each spec lies in."""
    by_mem: dict[int, list[Any]] = {}
    for s in specs:
        by_mem.setdefault(result.spec_dict[s].mem_id, []).append(s)
    for group in by_mem.values():
        sized = sorted((s for s in group if s.allocated_memory > 0), key=lambda s: result.spec_dict[s].mem_offset)
        obj, top = -1, -1
        for s in sized:
            r = result.spec_dict[s]
            if r.mem_offset >= top:  # no address in common with the range so far: a new object
                obj += 1
            r.mem_obj_id = obj
            top = max(top, r.mem_offset + s.allocated_memory)
        for s in group:  # zero bytes share no storage: an object each
            if s.allocated_memory == 0:
                obj += 1
                result.spec_dict[s].mem_obj_id = obj


def planner(solver: str = "pack-search", time_limit: float = 10, seed: int = 0, *, warm_start_greedy: bool = True,
            **options: Any) -> Planner:
    """An ExecuTorch memory-planning algorithm that packs each arena with mallocgame's ``solver``.

    ``time_limit`` (seconds) and ``seed`` are the solver's, per arena planned; ``options`` are
    the solver's own (checked by :func:`mallocgame.solve`). ``warm_start_greedy`` gives the solver
    ExecuTorch greedy's plan as a hint, so the result is never larger than greedy's. The
    returned object records each arena it planned in ``.records`` (:class:`ArenaRecord`).
    Use it in ``MemoryPlanningAlgorithmSuite(algo_list=[planner()])``, alone or beside ``greedy``.
    """
    entries = solver_entries()
    if solver not in entries:
        raise InputError(f"solver: unknown solver {solver!r} (registered: {', '.join(entries)})"
                         f"{did_you_mean(solver, entries)}")
    if "pack" not in solver_modes(entries[solver]):
        raise InputError(f"solver: {solver!r} does not solve pack mode")
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise InputError(f"time_limit: must be a positive number of seconds, got {time_limit!r}")
    return Planner(solver, float(time_limit), int(seed), warm_start_greedy, dict(options))


def memory_planning_pass(algorithms: Sequence[Any], **pass_options: Any):
    """``MemoryPlanningPass`` running ``algorithms`` in one suite (the smallest arena wins)."""
    _executorch()
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
    from executorch.exir.passes import MemoryPlanningPass

    return MemoryPlanningPass(memory_planning_algo=MemoryPlanningAlgorithmSuite(algo_list=list(algorithms)),
                              **pass_options)


def to_executorch(exported_program, algorithms: Sequence[Any] | None = None):
    """``to_edge(exported_program).to_executorch(...)`` with ``algorithms`` (default ``[planner()]``)
    as the memory planner; returns ExecuTorch's ``ExecutorchProgramManager``."""
    _executorch()
    from executorch.exir import ExecutorchBackendConfig, to_edge

    algorithms = [planner()] if algorithms is None else list(algorithms)
    return to_edge(exported_program).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=memory_planning_pass(algorithms)))


def arena_sizes(program_manager) -> list[int]:
    """``execution_plan[0].non_const_buffer_sizes`` of an ``ExecutorchProgramManager``."""
    return list(program_manager.executorch_program.execution_plan[0].non_const_buffer_sizes)


__all__ = ["ArenaRecord", "Planner", "PlanningError", "arena_sizes", "memory_planning_pass", "planner",
           "to_executorch"]
