"""``mallocgame import ...``: the importers' click commands (attach :data:`import_group`).

Each command writes a ``mallocgame.workload/1`` JSON file (atomically: a temp file and a
rename) and prints one line: output path, ops, buffers, total FLOPs, max live bytes. With
``-o -`` the JSON goes to stdout and that line to stderr.
Importer warnings go to stderr as ``warning: ...`` lines. Bad input: one line on stderr,
exit status 2, no output file.

Example:
    >>> from click.testing import CliRunner
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "w.json")
    >>> r = CliRunner().invoke(import_group, ["matmul", "--depth", "1", "--n", "64", "-o", out])
    >>> r.exit_code, r.output.split()[1:3]
    (0, ['ops=29', 'buffers=29'])
"""

from __future__ import annotations

import sys
import warnings
from typing import Callable

import click

from mallocgame.cli.common import check_output, is_stdout, write_text
from mallocgame.cli.progress import status
from mallocgame.formats.io import workload_text
from mallocgame.importers._common import summarize
from mallocgame.importers.hlo import LOOP_STATES, import_hlo
from mallocgame.importers.jax_program import load_jax
from mallocgame.importers.matmul import import_matmul
from mallocgame.importers.torch_export import import_torch
from mallocgame.problem.model import InputError, Problem


def _finish(build: Callable[[], Problem], out: str) -> None:
    check_output(out, "-o")
    command = click.get_current_context()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with status(f"import {command.info_name}: building the workload", quiet=command.meta.get("quiet", False)):
                problem = build()
                summary = summarize(problem).line()  # before writing: a file is written only when all went well
        except InputError as exc:
            _flush(caught)
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
    _flush(caught)
    write_text(out, workload_text(problem))
    click.echo(f"{'stdout' if is_stdout(out) else out}: {summary}", err=is_stdout(out))


def _flush(caught) -> None:
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
            continue
        click.echo(f"warning: {w.message}", err=True)


_OUT = click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False, allow_dash=True),
                    help="Workload JSON file to write ('-': stdout).")
_QUIET = click.option("--quiet", is_flag=True, expose_value=False,
                      callback=lambda ctx, _param, value: ctx.meta.__setitem__("quiet", value),
                      help="No progress on stderr (by default a status line on a terminal).")


_LOOP_STATE = click.option(
    "--loop-state", "loop_state", type=click.Choice(LOOP_STATES), default="fresh", show_default=True,
    help="A while loop's carried values: a fresh buffer per iteration, or one buffer across the loop where XLA's "
         "while aliasing keeps them in one (with --max-expanded-ops 1: the loop as XLA's memory-space assignment "
         "sees it).")


@click.group("import")
def import_group() -> None:
    """Turn real ML programs into workload JSON files (mallocgame.workload/1)."""


@import_group.command("hlo")
@click.argument("file", type=click.Path(dir_okay=False))
@_OUT
@_QUIET
@click.option("--name", default=None, help="Workload name (default: the file name).")
@click.option("--max-expanded-ops", default=200_000, show_default=True, type=click.IntRange(min=1),
              help="Above this many ops a while loop's body is imported once with scaled FLOPs and bytes.")
@_LOOP_STATE
def hlo_cmd(file: str, out: str, name: str | None, max_expanded_ops: int, loop_state: str) -> None:
    """Import scheduled after-optimizations XLA HLO text (is_scheduled=true)."""
    _finish(lambda: import_hlo(file, name=name, max_expanded_ops=max_expanded_ops, loop_state=loop_state), out)


@import_group.command("jax")
@click.argument("spec")
@click.option("--arg-shapes", "arg_shapes", default=None, metavar="DTYPE[D1,...],...",
              help="One XLA-style shape per positional argument, e.g. 'f32[8,128],bf16[512,512],s32[]'. "
                   "Without it, SPEC names a zero-argument callable returning (function, example arguments), "
                   "whose arguments may be pytrees.")
@click.option("--donate", default=None, metavar="I,J,...", help="Indices of the arguments donated to the outputs.")
@_OUT
@_QUIET
@click.option("--name", default=None, help="Workload name (default: the function's name).")
@click.option("--max-expanded-ops", default=200_000, show_default=True, type=click.IntRange(min=1),
              help="Above this many ops a while loop's body is imported once with scaled FLOPs and bytes.")
@click.option("--save-hlo", "save_hlo", default=None, type=click.Path(dir_okay=False), metavar="FILE.hlo.txt",
              help="Also write the scheduled HLO text (what `mallocgame import hlo` reads).")
@_LOOP_STATE
def jax_cmd(spec: str, arg_shapes: str, donate: str | None, out: str, name: str | None, max_expanded_ops: int,
            save_hlo: str | None, loop_state: str) -> None:
    """Import a JAX function compiled by XLA:CPU: SPEC is module.path:function or file.py:function
    (or, without --arg-shapes, a factory returning the function and its example arguments).

    The function is jitted, lowered and compiled on the CPU backend and its scheduled HLO
    imported exactly as `mallocgame import hlo` does.
    """
    check_output(save_hlo, "--save-hlo")

    def build() -> Problem:
        return load_jax(spec, arg_shapes, donate=donate, name=name, max_expanded_ops=max_expanded_ops,
                        hlo_output=save_hlo, loop_state=loop_state).problem
    _finish(build, out)


@import_group.command("torch")
@click.argument("spec")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="D1,D2,...",
              help="Shape of one float32 example input, e.g. 1,3,32,32 (repeat for several inputs).")
@click.option("--weights", type=click.Choice(["use", "program", "none"]), default="program", show_default=True,
              help="Weights live from first to last use, for the whole program, or are left out.")
@click.option("--level", type=click.Choice(["high", "core"]), default="high", show_default=True,
              help="ATen level: as torch.export records it, or decomposed to core ATen.")
@click.option("--name", default=None, help="Workload name (default: the callable's name).")
@_OUT
@_QUIET
def torch_cmd(spec: str, input_shapes: tuple[str, ...], weights: str, level: str, name: str | None, out: str) -> None:
    """Import a PyTorch module via torch.export: SPEC is module.path:callable or file.py:callable."""
    def build() -> Problem:
        return import_torch(spec, list(input_shapes), weights=weights, level=level, name=name)
    _finish(build, out)


@import_group.command("matmul")
@click.option("--factorization", default=None, metavar="F.npy|F.npz|strassen|naiveN",
              help="Factorization [3, n*n, R] (.npy, or .npz with u, v, w / one array; FILE.npz:KEY). "
                   "Default: Strassen 2x2 rank 7.")
@click.option("--n", "size", type=click.IntRange(min=1), default=None,
              help="Matrix size N (N x N operands); a multiple of n**depth. Default n**depth * 256.")
@click.option("--depth", type=click.IntRange(min=1), default=1, show_default=True, help="Recursion depth D.")
@click.option("--block", type=click.IntRange(min=1), default=None, help="Base block side (instead of --n).")
@click.option("--dtype", type=click.Choice(["f32", "bf16", "f16", "f64"]), default="f32", show_default=True)
@click.option("--name", default=None, help="Workload name.")
@_OUT
@_QUIET
def matmul_cmd(factorization: str | None, size: int | None, depth: int, block: int | None, dtype: str,
               name: str | None, out: str) -> None:
    """Import a recursive fast-matmul program (AlphaTensor-style factorization, checked numerically)."""
    def build() -> Problem:
        return import_matmul(factorization, depth=depth, size=size, block=block, dtype=dtype, name=name)
    _finish(build, out)


if __name__ == "__main__":  # pragma: no cover
    import_group()
