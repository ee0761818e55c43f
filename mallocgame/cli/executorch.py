"""``mallocgame executorch SPEC --input-shape ... -o model.pte``: an ExecuTorch program planned by mallocgame.

SPEC is as in ``mallocgame import torch`` (``module.path:callable`` or ``file.py:callable``,
returning an ``nn.Module`` or ``(module, example_inputs)``). The module is exported
(``torch.export``), lowered (``to_edge(...).to_executorch(...)``) with
:func:`mallocgame.integrations.executorch.planner` as its memory planner, and the ``.pte`` is
written atomically (a temp file and a rename). One line on stdout: the file, the arena bytes,
ExecuTorch greedy's on the same program, the max live bytes and the planning time. Bad input
(a bad SPEC or shape, a failed export, executorch not installed): one ``error:`` line, exit 2.
"""

from __future__ import annotations

import time
import warnings

import click

from mallocgame.cli.common import SECONDS, SEED, check_output, fail
from mallocgame.cli.progress import status
from mallocgame.engine.registry import solver_entries, solver_modes
from mallocgame.formats.io import atomic_output
from mallocgame.importers.torch_export import export_module, load_spec, parse_shape
from mallocgame.integrations.executorch import _executorch, arena_sizes, planner, to_executorch
from mallocgame.problem.model import InputError


@click.command("executorch")
@click.argument("spec")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="D1,D2,...",
              help="Shape of one float32 example input, e.g. 1,3,32,32 (repeat for several inputs).")
@click.option("--solver", "solver_name", default="pack-search", show_default=True,
              help="A registered pack-mode solver (see `mallocgame solvers`).")
@click.option("--time-limit", type=SECONDS, default=10.0, show_default=True, help="Seconds per arena.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--with-greedy", is_flag=True,
              help="Run ExecuTorch's greedy beside it in one suite (the smaller arena wins; greedy on a tie).")
@click.option("-o", "--output", required=True, metavar="MODEL.pte", help="The ExecuTorch program to write.")
@click.option("--quiet", is_flag=True, help="No status line on stderr (by default one on a terminal).")
def executorch_command(spec: str, input_shapes: tuple[str, ...], solver_name: str, time_limit: float, seed: int,
                       with_greedy: bool, output: str, quiet: bool = False) -> None:
    """Export SPEC to an ExecuTorch .pte whose memory plan mallocgame packs."""
    if output == "-":
        fail("-o: a .pte is binary: give a file name")
    check_output(output, "-o")
    with status(f"executorch: exporting {spec}", quiet=quiet) as line:
        program, data, algo, seconds = _plan(spec, input_shapes, solver_name, time_limit, seed, with_greedy, line)

    try:
        with atomic_output(output, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        fail(f"-o: cannot write {output}: {exc.strerror or exc}")
    arena = sum(arena_sizes(program))
    greedy_arena = sum(r.reserved + r.greedy_peak + r.padding for r in algo.records)
    live = sum(r.max_live for r in algo.records)
    statuses = ",".join(sorted({r.status for r in algo.records})) or "nothing to plan"
    click.echo(f"{output}: arena {arena} bytes (ExecuTorch greedy {greedy_arena}, max live {live}); "
               f"{solver_name} {statuses}, lowered and planned in {seconds:.2f} s")


def _plan(spec: str, input_shapes: tuple[str, ...], solver_name: str, time_limit: float, seed: int, with_greedy: bool,
          line):
    """Export and lower SPEC with mallocgame as the memory planner: the program, its bytes, the planner and the
    seconds lowering took."""
    try:
        module, example = _load(spec, input_shapes)  # the user's errors first: no ExecuTorch import for them

        entries = solver_entries()
        if solver_name in entries and "pack" not in solver_modes(entries[solver_name]):
            raise InputError(f"--solver: {solver_name!r} does not solve pack mode")

        algo = planner(solver_name, time_limit=time_limit, seed=seed)
        _executorch()

        ep = export_module(module, example)
        line.set(f"executorch: lowering {spec} and planning its memory with {solver_name}")
    except InputError as exc:
        line.close()  # the error line is not drawn over
        fail(str(exc))
    algorithms = [algo]
    if with_greedy:
        from executorch.exir.memory_planning import greedy

        algorithms = [greedy, algo]
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # ExecuTorch's own deprecation notes are not the user's business
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            program = to_executorch(ep, algorithms)
            data = program.buffer
    except InputError as exc:
        line.close()  # the error line is not drawn over
        fail(str(exc))
    except Exception as exc:  # ExecuTorch's lowering of this module: one line
        first = (str(exc).strip().splitlines() or [""])[0]
        line.close()
        fail(f"{spec}: ExecuTorch lowering failed ({type(exc).__name__}: {first[:300]})")
    seconds = time.perf_counter() - t0
    return program, data, algo, seconds


def _load(spec: str, input_shapes: tuple[str, ...]):
    import torch

    shapes = [parse_shape(s) for s in input_shapes]
    obj = load_spec(spec)
    example = None
    if isinstance(obj, tuple) and len(obj) == 2:
        obj, example = obj
        example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    if not isinstance(obj, torch.nn.Module):
        raise InputError(f"{spec}: the callable must return an nn.Module or (module, example_inputs), "
                         f"got {type(obj).__name__}")
    if shapes:
        gen = torch.Generator().manual_seed(0)
        example = tuple(torch.randn(s, generator=gen) for s in shapes)
    if not example:
        raise InputError(f"{spec}: no example inputs: give --input-shape (e.g. --input-shape 1,3,32,32)")
    return obj, example
