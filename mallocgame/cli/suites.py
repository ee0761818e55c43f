"""``mallocgame suites``: list the built-in suites and their entries, or export them."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mallocgame.cli.common import check_output
from mallocgame.cli.progress import status
from mallocgame.formats.io import atomic_write_text, output_folder, problem_csv_text, write_workload_json
from mallocgame.inputs.suites import BENCHMARKS_ENV, SUITES, Entry, facts_of, suite_entries
from mallocgame.problem.model import InputError
from mallocgame.problem.units import format_bytes


@click.command("suites")
@click.argument("name", required=False)
@click.option("--benchmarks", "benchmarks", default=None, metavar="DIR",
              help=f"The shared benchmark folder (default: ${BENCHMARKS_ENV}, then ../shared/benchmarks).")
@click.option("--export", "export_dir", default=None, metavar="DIR",
              help="Write every entry of NAME to DIR (JSON workloads; CSV inputs are copied as CSV).")
@click.option("--quiet", is_flag=True, help="No progress on stderr (by default a status line on a terminal).")
def suites_command(name: str | None, benchmarks: str | None, export_dir: str | None, quiet: bool = False) -> None:
    """List the built-in suites (name, count, description), or the entries of suite NAME."""
    if name is None:
        if export_dir:
            click.echo("error: --export needs a suite NAME", err=True)
            sys.exit(2)
        rows = []
        with status("suites: reading the suites", quiet=quiet) as line:
            for suite in SUITES.values():
                line.set(f"suites: reading {suite.name}")
                try:
                    entries = suite.entries(benchmarks)
                    pending = [e for e in entries if e.pending]
                    note = f" ({len(pending)} pending: {pending[0].pending})" if pending else ""
                    count = str(len(entries) - len(pending))
                except InputError as exc:
                    count, note = "-", f" [not available: {exc}]"
                rows.append((suite.name, count, suite.description + note))
        width = max(len(r[0]) for r in rows)
        click.echo(f"{'suite':<{width}}  count  description")
        for n, c, d in rows:
            click.echo(f"{n:<{width}}  {c:>5}  {d}")
        return
    if export_dir:
        check_output(export_dir, "--export", folder=True)
    try:
        with status(f"suites: reading {name}", quiet=quiet):
            entries = suite_entries(name, benchmarks, include_pending=True)
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    _list_entries(entries, export_dir)


def _list_entries(entries: list[Entry], export_dir: str | None) -> None:
    width = max(len(e.name) for e in entries)
    click.echo(f"{'entry':<{width}}  {'buffers':>7}  {'ops':>5}  {'max live':>10}  {'capacity':>10}  description")
    for e in entries:
        if e.pending:
            click.echo(f"{e.name:<{width}}  {'-':>7}  {'-':>5}  {'-':>10}  {'-':>10}  {e.description} "
                       f"[pending: {e.pending}]")
            continue
        p = e.build() if export_dir or e.facts is None else None  # a listing reads the suite's facts if it has them
        f = facts_of(p) if p is not None else e.facts
        cap = "-" if f["capacity"] is None else format_bytes(f["capacity"])
        frac = f" (capacity {e.capacity_fraction:.0%} of max live)" if e.capacity_fraction else ""
        click.echo(f"{e.name:<{width}}  {f['buffers']:>7}  {f['ops']:>5}  {format_bytes(f['max_live']):>10}  {cap:>10}  "
                   f"{e.description}{frac}")
        if export_dir:
            output_folder(export_dir)
            if p.has_ops:
                path = Path(export_dir) / f"{e.name}.json"
                write_workload_json(path, p, explicit_capacity=True)
            else:
                cap_part = f".{p.capacity}" if p.capacity is not None else ""
                atomic_write_text(Path(export_dir) / f"{e.name}{cap_part}.csv", problem_csv_text(p))

