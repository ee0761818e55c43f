"""What every script in ``experiments/`` shares: inputs, running ``mallocgame``, provenance, results files.

Run the scripts from the project root with the package installed (``pip install -e .``)::

    nice python experiments/NAME.py [--out PATH] ...

Python puts a script's own folder first on ``sys.path``, so ``from _common import ...`` works
without any path manipulation, and ``experiments/`` needs no ``__init__.py``.

* :func:`benchmarks_dir` -- the one way to find the shared benchmark folder
  (``--benchmarks DIR``, then ``$MALLOCGAME_BENCHMARKS``, then ``../shared/benchmarks``: the
  lookup of ``mallocgame compare --benchmarks``).
* :func:`run_mallocgame` -- run ``mallocgame ARGS`` as a user would (a subprocess from the
  project root); returns the command as a user types it, what it printed, and the seconds.
* :func:`provenance` -- the command line that ran the script, the git commit (``+dirty`` when
  tracked files have uncommitted changes), the date and the machine.
* :func:`write_results` -- write a results file atomically, headed by the provenance;
  :class:`Transcript` keeps what a script printed, for its results file.
* The ``mallocgame compare`` summaries of the ``paper_*.py`` scripts: :func:`read_rows`,
  :func:`speedup_stats`, :func:`stats_table`, :func:`per_input_table`, :func:`registered_solvers`.
* :func:`reference_vs_native` -- steps timed under both engines, side by side (the ``bench_*answer_output.py``).
* :func:`run_in_trees` -- a probe run once per project tree in turn (two builds compared, ``--trees``).
* :func:`read_runs`, :func:`run_rotated`, :func:`tally` -- the tuning scripts' runs: resumed from their CSV, in an
  order rotated per problem, counted against a baseline for the sign test.
* :func:`preload_solvers` -- every contestant's heavy imports, once, before an in-process script's first timed run.
"""

from __future__ import annotations

import csv
import datetime
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
IMPROVED = 1 + 1e-6  # same threshold as `compare`: above it a speed-up over greedy is an improvement


# --------------------------------------------------------------------------- inputs

def prefetch_programs(suite: str, entries: str = ""):
    """``(entry, problem)`` for each entry of ``suite`` named in ``entries`` (comma-separated; empty: all), the
    problem in prefetch mode at the suite's capacity (in-place pairs merged, as the workload reader does)."""
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries

    wanted = set(filter(None, entries.split(",")))
    for e in suite_entries(suite):
        if not wanted or e.name in wanted:
            yield e, prepare(e.build(), mode="prefetch")[0]


def benchmarks_dir(sub: str | None = None, *, explicit: str | os.PathLike | None = None) -> Path:
    """The shared benchmark folder, or its subfolder ``sub`` (e.g. ``"minimalloc"``).

    Looked for where ``mallocgame compare`` looks (:func:`mallocgame.inputs.suites.benchmark_candidates`):
    ``explicit`` (a script's ``--benchmarks DIR``), then ``$MALLOCGAME_BENCHMARKS``, then
    ``../shared/benchmarks`` next to the checkout or the working folder. Exits with a one-line
    message if none exists.
    """
    from mallocgame.inputs.suites import benchmark_candidates
    from mallocgame.inputs.suites import benchmarks_dir as find
    from mallocgame.problem.model import InputError

    explicit = None if explicit is None else str(explicit)
    # The checkout's neighbour, whatever the working folder (the package's own guess may miss it).
    tried = benchmark_candidates(explicit) + ([] if explicit else [ROOT.parent / "shared" / "benchmarks"])
    if sub is not None:
        for where in [explicit] + ([] if explicit else [str(tried[-1])]):
            try:
                return find(where, subfolder=sub) / sub
            except InputError as exc:
                error = exc
        raise SystemExit(str(error))
    for root in tried:
        if root.is_dir():
            return root
    raise SystemExit(f"benchmark folder not found (looked in: {', '.join(map(str, dict.fromkeys(tried)))}); "
                     "pass --benchmarks DIR or set MALLOCGAME_BENCHMARKS")


def shown_path(path: str | os.PathLike) -> str:
    """``path`` relative to the project root when it is inside it (commands run from the root), else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- running mallocgame

def run_mallocgame(args: list[str], *, echo: bool = True, log: str | os.PathLike | None = None) -> tuple[str, str, float]:
    """Run ``mallocgame ARGS`` from the project root; returns ``(command, stdout, seconds)``.

    The process is ``python -m mallocgame.cli.main ARGS`` with this interpreter, so it is the
    installed package's CLI; ``command`` is what a user types (``mallocgame ARGS``). With
    ``echo`` the command and the output stream to this terminal as they come; with ``log`` the
    output (stdout and stderr) goes to that file instead and ``stdout`` is returned empty.
    Exits if the command rejects its input (exit code 2); other exit codes are the caller's to
    read from the output (e.g. ``validate`` prints ``invalid: ...`` and exits 1).
    """
    args = [str(a) for a in args]
    shown = " ".join(shlex.quote(c) for c in ["mallocgame", *args])
    if echo:
        print(f"$ {shown}", flush=True)
    argv = [sys.executable, "-m", "mallocgame.cli.main", *args]
    t0 = time.monotonic()
    if log is not None:
        with open(log, "w") as fh:
            code = subprocess.run(argv, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT).returncode
        printed = ""
    else:
        proc = subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE)
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            if echo:
                print(line, end="", flush=True)
            lines.append(line)
        code = proc.wait()
        printed = "".join(lines)
    if code == 2:
        sys.exit(f"mallocgame rejected its input: {shown}")
    if log is not None and code != 0:
        sys.exit(f"failed (exit {code}, see {log}): {shown}")
    return shown, printed, time.monotonic() - t0


# --------------------------------------------------------------------------- provenance

def script_command(argv: list[str] | None = None) -> str:
    """``python experiments/NAME.py ARGS`` as this script was started (``argv``: its arguments, default sys.argv[1:])."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or sys.argv[0]
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(shlex.quote(c) for c in ["python", shown_path(script), *map(str, args)])


def git_commit() -> str:
    """Short hash of HEAD, with ``+dirty`` if tracked files have uncommitted changes; ``unknown`` outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def nproc() -> int:
    """Cores this process may run on (what ``nproc`` prints)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def machine() -> str:
    """Cores, load average now, niceness and Python version, in one line."""
    load = os.getloadavg()
    nice = os.nice(0)
    return (f"{nproc()} cores (nproc), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
            + (f", niceness {nice}" if nice else "") + f", Python {platform.python_version()}")


def provenance(argv: list[str] | None = None) -> dict[str, str]:
    """What produced a result: ``command`` (the script's), ``commit``, ``date`` (ISO 8601, local) and ``machine``."""
    return {"command": script_command(argv), "commit": git_commit(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": machine()}


def provenance_text(argv: list[str] | None = None, *, markdown: bool = True) -> str:
    """The provenance as the lines that head a results file (markdown, or ``# ``-comment lines)."""
    p = provenance(argv)
    if markdown:
        return (f"Recorded by `{p['command']}` (from the project root) at commit {p['commit']}, {p['date']}; "
                f"machine: {p['machine']}.\n")
    return "".join(f"# {k}: {v}\n" for k, v in p.items())


# --------------------------------------------------------------------------- results files

def results_path(out: str | os.PathLike) -> Path:
    """Where ``--out`` points: a bare file name is under ``experiments/results/``, a path is taken as given."""
    out = Path(out)
    return RESULTS / out if out.parent == Path(".") and not out.is_absolute() else out


def write_results(name: str | os.PathLike, text: str, *, argv: list[str] | None = None, quiet: bool = False) -> Path:
    """Write ``text`` to ``name`` (see :func:`results_path`) atomically, headed by the :func:`provenance`.

    In a markdown file the provenance line goes right under the ``# title`` if the text opens with
    one (else on top); other files get it as ``# ``-comment lines on top. The write goes through a
    temp file in the same folder and ``os.replace`` (:func:`mallocgame.formats.io.atomic_write_text`), so
    an interrupted run never leaves half a file. Returns the path written.
    """
    from mallocgame.formats.io import atomic_write_text

    path = results_path(name)
    if path.suffix == ".md":
        head = provenance_text(argv)
        title, sep, rest = text.partition("\n")
        if title.startswith("# ") and sep:
            text = f"{title}\n\n{head}\n" + rest.lstrip("\n")
        else:
            text = f"{head}\n{text}"
    else:
        text = provenance_text(argv, markdown=False) + text
    atomic_write_text(path, text)
    if not quiet:
        print(f"wrote {shown_path(path)}")
    return path


class Transcript:
    """``print`` that also keeps the lines, for scripts whose results file is what they printed."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def fenced(text: str) -> str:
    return "```\n" + text.rstrip("\n") + "\n```\n"


# --------------------------------------------------------------------------- compare summaries (paper_*.py)

def registered_solvers(mode: str | None = "map") -> list[str]:
    """Every registered solver that loads and supports ``mode`` (``None``: any mode)."""
    from mallocgame.engine.registry import SolverLoadError, load_solver, solver_entries

    names = []
    for name in solver_entries():
        try:
            solver = load_solver(name)
        except SolverLoadError as exc:
            print(f"skipping {name}: {exc}")
            continue
        if mode is None or mode in getattr(solver, "modes", {"map", "pack"}):
            names.append(name)
        else:
            print(f"skipping {name}: no {mode} mode")
    return names


def read_rows(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a ``mallocgame compare --out`` CSV."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _f(x: str | None) -> float | None:
    return float(x) if x not in ("", None) else None


def speedup_stats(rows: list[dict[str, str]], solver: str) -> dict[str, float | int | None]:
    """Over the inputs of ``rows``: valid answers, improved / equal / worse vs greedy-xla, speed-up stats.

    ``share_improved`` counts every input (an invalid answer is not an improvement);
    ``mean``/``max``/``geo`` are over the inputs with a valid answer.
    """
    mine = [r for r in rows if r["solver"] == solver]
    vs = [v for r in mine if r["valid"] == "true" and (v := _f(r["speedup_vs_greedy"])) is not None]
    slow = [v for r in mine if r["valid"] == "true" and (v := _f(r["speedup_vs_slow"])) is not None]
    improved = sum(v > IMPROVED for v in vs)
    worse = sum(v < 1 / IMPROVED for v in vs)
    return {
        "inputs": len(mine), "valid": len(vs), "improved": improved, "equal": len(vs) - improved - worse,
        "worse": worse, "share_improved": improved / len(mine) if mine else None,
        "mean": sum(vs) / len(vs) if vs else None, "max": max(vs) if vs else None, "min": min(vs) if vs else None,
        "geo": math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None,
        "mean_vs_slow": sum(slow) / len(slow) if slow else None,
    }


def fmt(x, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def stats_table(rows: list[dict[str, str]], solvers: list[str]) -> str:
    """Markdown: one line per solver with the share improved and the speed-ups over greedy-xla."""
    lines = ["| solver | valid | improved / equal / worse vs greedy-xla | share improved | mean speed-up "
             "| max | min | geo-mean | mean speed-up over all-slow |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for s in solvers:
        st = speedup_stats(rows, s)
        lines.append(f"| {s} | {st['valid']}/{st['inputs']} | {st['improved']} / {st['equal']} / {st['worse']} | "
                     f"{fmt(st['share_improved'], '.0%')} | {fmt(st['mean'])} | {fmt(st['max'])} | "
                     f"{fmt(st['min'])} | {fmt(st['geo'])} | {fmt(st['mean_vs_slow'], '.3f')} |")
    return "\n".join(lines) + "\n"


def machine_note() -> str:
    """The paper scripts' note on the machine (the commit is in the results file's provenance line)."""
    load = os.getloadavg()
    nice = os.nice(0)
    return (f"Machine: {nproc()} cores shared with other engineers' jobs "
            f"(load average at the end {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f})"
            + ("; run under `nice`." if nice else "."))


def per_input_table(rows: list[dict[str, str]]) -> str:
    """Markdown: per input, greedy-xla's gap to the bound and the best solver's (ties listed together)."""
    lines = ["| input | buffers | greedy-xla gap to bound | best solver(s) | best gap | best speed-up over greedy-xla |",
             "|---|---:|---:|---|---:|---:|"]
    for name in dict.fromkeys(r["input"] for r in rows):
        mine = [r for r in rows if r["input"] == name and r["valid"] == "true" and r["value"]]
        if not mine:
            lines.append(f"| {name} | - | - | (no valid answer) | - | - |")
            continue
        greedy = next((r for r in mine if r["solver"] == "greedy-xla"), None)
        top = max(float(r["value"]) for r in mine)
        best = [r["solver"] for r in mine if float(r["value"]) >= top * (1 - 1e-9)]
        gap = min(float(r["gap"]) for r in mine if r["gap"]) if any(r["gap"] for r in mine) else None
        vs = max(_f(r["speedup_vs_greedy"]) or 0.0 for r in mine)
        lines.append(f"| {name} | {mine[0]['total']} | {fmt(_f(greedy['gap']) if greedy else None, '.2%')} | "
                     f"{', '.join(best)} | {fmt(gap, '.2%')} | {vs:.4f} |")
    return "\n".join(lines) + "\n"


def parse_peak(validate_output: str) -> int | None:
    """The peak from ``mallocgame validate``'s ``ok: ... peak N`` line; ``None`` if the answer was invalid."""
    m = re.search(r"^ok\b.*\bpeak (\d+)", validate_output, re.M)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- reference vs native (bench_*answer_output.py)

@dataclass(frozen=True)
class OwnSeconds:
    """A step's answer with the seconds of the part of it a row times (the rest of the step is set-up)."""

    answer: object
    seconds: float


def reference_vs_native(steps, *, repeats: int = 1, digits: int = 2) -> str:
    """Markdown table: per ``(name, fn)`` of ``steps``, the median CPU (``time.process_time``) and wall seconds of
    ``repeats`` calls of ``fn`` under the Python reference (``MALLOCGAME_ENGINE=python``), then under the native
    engine (one after the other, so a busy machine slows both alike), and whether both gave the same answer (the last
    call's). A step that returns :class:`OwnSeconds` is timed by its seconds (CPU and wall alike). Each row is
    printed as it is made."""
    rows = ["| step | reference CPU s | reference wall s | native CPU s | native wall s | same answer |",
            "|---|---:|---:|---:|---:|---|"]
    for name, fn in steps:
        (ref_cpu, ref_wall, ref_out), (cpu, wall, out) = (_timed_under(engine, fn, repeats)
                                                          for engine in ("python", "native"))
        same = ref_out == out
        rows.append(f"| {name} | {ref_cpu:.{digits}f} | {ref_wall:.{digits}f} | {cpu:.{digits}f} | "
                    f"{wall:.{digits}f} | {'yes' if same else 'NO'} |")
        print(rows[-1], flush=True)
    return "\n".join(rows) + "\n"


def _timed_under(engine: str, fn, repeats: int) -> tuple[float, float, object]:
    """Median CPU and wall seconds of ``repeats`` calls of ``fn`` under ``engine``, and the last call's answer."""
    os.environ["MALLOCGAME_ENGINE"] = engine
    cpus, walls, out = [], [], None
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.monotonic()
        out = fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.monotonic() - wall)
        if isinstance(out, OwnSeconds):
            cpus[-1] = walls[-1] = out.seconds
            out = out.answer
    return statistics.median(cpus), statistics.median(walls), out


# --------------------------------------------------------------------------- two builds side by side (--trees)

def add_tree_arguments(ap, out: str) -> None:
    """``--trees``, ``--rounds`` and ``--out`` (default ``out``) of a probe that compares builds (:func:`run_in_trees`)."""
    ap.add_argument("--trees", nargs="*", default=[], help="project trees to compare (each run on its own path)")
    ap.add_argument("--rounds", type=int, default=2, help="with --trees: rounds of one run per tree")
    ap.add_argument("--out", default=out, help="with --trees: the results file")


def run_in_trees(show: Transcript, script: str | os.PathLike, args: list[str], trees: list[str],
                 rounds: int) -> list[tuple[str, str]]:
    """Run ``python SCRIPT ARGS`` once per tree of ``trees`` in turn, for ``rounds`` rounds, each with
    ``PYTHONPATH`` at that tree (its own compiled module; ``MALLOCGAME_ENGINE`` unset: the native engine), so that
    two builds are compared under the same load. Each run's output is shown as a fenced block headed
    "Round R, TREE:"; returns ``(tree, output)`` of every run in order. Exits with one line when a run fails."""
    outputs = []
    for r in range(rounds):
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            env.pop("MALLOCGAME_ENGINE", None)
            run = subprocess.run([sys.executable, str(script), *map(str, args)], env=env, capture_output=True,
                                 text=True, check=False)
            if run.returncode != 0:
                raise SystemExit(f"{tree}: the probe failed (exit {run.returncode}): {run.stderr.strip()[-400:]}")
            show()
            show(f"Round {r + 1}, {tree}:")
            show()
            show("```")
            for line in run.stdout.strip().splitlines():
                show(line)
            show("```")
            outputs.append((tree, run.stdout))
    return outputs


# --------------------------------------------------------------------------- tuning runs (tune_*.py)

def preload_solvers(names) -> None:
    """Import the heavy modules every solver of ``names`` declares (its ``preload``), once, before the first timed run.

    :func:`mallocgame.engine.runner.run_solver` imports them on every run, before the solver's own clock starts but
    inside the wall time a script measures around the call; in one process only the first run of a solver pays the
    first import (scipy's is seconds on a loaded machine), so a script comparing contestants in-process calls this
    before its first run and no run pays it.
    """
    from mallocgame.engine import runner
    from mallocgame.engine.registry import load_solver

    for name in dict.fromkeys(names):
        runner.preload(load_solver(name))


def read_runs(path: str | os.PathLike, setting: str) -> dict[tuple[str, str], dict[str, str]]:
    """The rows of a tuning script's runs CSV by ``(problem, row[setting])``; empty when there is no such file."""
    if not Path(path).exists():
        return {}
    with open(path, newline="") as fh:
        return {(r["problem"], r[setting]): r for r in csv.DictReader(fh)}


def run_rotated(csv_path: str | os.PathLike, fields: list[str], done: dict, labels: list[str], settings: list[str],
                run, *, after_problem=None) -> None:
    """Every setting of ``settings`` on every problem of ``labels``; on problem ``i`` in their order rotated by
    ``i``, so that none always runs first or last on a loaded machine. ``run(i, setting)`` makes the row of one run
    (a dict of ``fields``, its ``problem`` the label); each row is appended to ``csv_path`` as it ends (headed by
    ``fields`` in a new file) and kept in ``done`` (:func:`read_runs`'s form), and a run already in ``done`` is
    skipped: a rerun resumes. ``after_problem(i)`` is called when problem ``i``'s runs are all done."""
    new = not Path(csv_path).exists()
    with open(csv_path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        if new:
            writer.writeheader()
        for i, label in enumerate(labels):
            turn = i % len(settings)
            for setting in settings[turn:] + settings[:turn]:
                if (label, setting) in done:
                    continue
                row = run(i, setting)
                writer.writerow(row)
                fh.flush()
                done[(label, setting)] = {k: str(v) for k, v in row.items()}
            if after_problem is not None:
                after_problem(i)


@dataclass
class Tally:
    """Wins, ties and losses of values against a baseline's, in all and by family (``[wins, losses]``)."""

    wins: int = 0
    ties: int = 0
    losses: int = 0
    by_family: dict[str, list[int]] = field(default_factory=dict)

    def behind(self) -> dict[str, tuple[int, int]]:
        """The families with more losses than wins: ``{family: (wins, losses)}``."""
        return {f: (w, lo) for f, (w, lo) in self.by_family.items() if lo > w}


def tally(mode: str, pairs) -> Tally:
    """:class:`Tally` of ``(family, value, baseline's value)`` triples in ``mode`` (a win: better by more than
    :data:`mallocgame.problem.objective.TOLERANCE`, :func:`mallocgame.problem.objective.better`; the rest ties). The
    sign test of a tally is ``level_muzero_mcts.sign_test(wins, losses)`` (ties dropped)."""
    from mallocgame.problem.objective import better

    t = Tally()
    for family, value, base in pairs:
        count = t.by_family.setdefault(family, [0, 0])
        if better(mode, value, base):
            t.wins += 1
            count[0] += 1
        elif better(mode, base, value):
            t.losses += 1
            count[1] += 1
        else:
            t.ties += 1
    return t
