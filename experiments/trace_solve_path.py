"""Follow ``mallocgame solve PROBLEM --mode prefetch --solver portfolio`` from the CLI to the printed answer.

The hallway, not the rooms: at each milestone of the solve path -- a solver's ``solve`` entered (the portfolio's,
and each member's in its child), an answer judged (``judge``), the summary line made (``summary``), a call up a
layer (below) -- the stack is walked, and every call between two consecutive frames of the package (mallocgame/,
solvers/, hybrid/, search/, hardware/; frames of the standard library, click and numpy in between are skipped) is
recorded, in the parent and in every forked child (the profile hook is inherited by a fork; each process appends
what it sees first to a file of its own). Printed:

* files: the distinct package files on those stacks (the path);
* calls: the distinct calls (caller function -> callee function) between two different files on them;
* entered: per file, the distinct calls into it from another file;
* climbs: the calls from a module to a module of a higher layer of the layers contract (``pyproject.toml``'s
  ``[tool.importlinter]`` contract of type ``layers``: the rooms, top first), with their layers. The contract
  forbids the imports, so each such call is to a function or an object handed down (a solver loaded by name, a
  callback); a module's body run by an import (the registry or the preload loading a solver) is not a call;
* old climbs (the earlier measure, kept beside it): the calls from a solver (solvers/, hybrid/, search/) into the
  modules that run solvers (the CLI, the API, compare, the runner, the solve path, the report, the pools, the fork
  primitive, the session), in two: those into the session (``session.py``: the facts a request hands its solver)
  and those into the rest. They are calls down the layers; their stacks are recorded apart, and the files they
  alone reach are printed apart (``files with the old climbs``).

Usage (the same script measures any checkout: set PYTHONPATH to it):
    PYTHONPATH=. python experiments/trace_solve_path.py [PROBLEM] [--time-limit S] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import tomllib
from collections import Counter
from pathlib import Path

import mallocgame

PACKAGE = Path(mallocgame.__file__).resolve().parent
ROOT = PACKAGE.parent
FOLDERS = ("mallocgame", "solvers", "hybrid", "search", "hardware")
SOLVER_FOLDERS = ("solvers", "hybrid", "search")
# The modules that run solvers: a call from a solver into one of these climbs back up the path.
RUNNING = ("mallocgame/cli/", "mallocgame/api.py", "mallocgame/engine/comparison.py", "mallocgame/engine/runner.py",
           "mallocgame/engine/solving.py", "mallocgame/engine/report.py", "mallocgame/engine/pools.py",
           "mallocgame/runtime/forking.py",
           "mallocgame/forked.py", "mallocgame/engine/session.py")
FACTS = ("mallocgame/engine/session.py",)  # the facts handed in the request: its climbs are counted apart
MILESTONES = {"judge", "summary"}


def layer_ranks(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, int]:
    """The rooms of the layers contract, each with its rank (0: the top layer; rooms of one layer share it)."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    ranks: dict[str, int] = {}
    for rank, layer in enumerate(layers):
        for room in layer.replace(":", "|").split("|"):
            ranks[room.strip().strip("()")] = rank
    return ranks


RANKS = layer_ranks()


def room_of(path: str) -> str | None:
    """The room of a package file: ``mallocgame/engine/x.py`` -> ``engine``, ``solvers/msa.py`` -> ``solvers``
    (the top-level folders are rooms of the package), ``mallocgame/api.py`` -> ``api``."""
    parts = Path(path).with_suffix("").parts
    inner = parts[1:] if parts[0] == "mallocgame" else parts
    return inner[0] if inner and inner[0] in RANKS else None


def climbs_a_layer(caller: str, callee: str) -> bool:
    """Is a call from the file ``caller`` to the file ``callee`` a call up a layer?"""
    up, down = room_of(callee), room_of(caller)
    return up is not None and down is not None and RANKS[up] < RANKS[down]


def package_file(filename: str) -> str | None:
    """The path of a package source file relative to the checkout (symlinks resolved), else ``None``."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in FOLDERS and rel.suffix == ".py" else None


class Tracer:
    """The profile hook: at each milestone, the package frames of the stack, as calls written once per process."""

    def __init__(self, folder: str):
        self.folder = folder
        self.seen: set = set()
        self.files: dict[str, str | None] = {}
        self.out = None
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self.out = None  # a file of its own; what the parent saw is in the parent's

    def where(self, code) -> str | None:
        name = code.co_filename
        if name not in self.files:
            self.files[name] = package_file(name)
        return self.files[name]

    def hook(self, frame, event, arg) -> None:
        if event != "call":
            return
        code = frame.f_code
        name = code.co_name
        here = self.where(code)
        if here is None:
            return
        if (name == "solve" and here.startswith(SOLVER_FOLDERS)) or name in MILESTONES:
            self.record(frame)
            return
        caller = self.caller_file(frame)
        if caller is None or name == "<module>":  # a module's body run by an import (a solver loaded by name)
            return
        if climbs_a_layer(caller, here):
            self.record(frame)
        elif here.startswith(RUNNING) and caller.startswith(SOLVER_FOLDERS):
            self.record(frame, kind="old")

    def caller_file(self, frame) -> str | None:
        """The file of the nearest package frame below ``frame``."""
        caller = frame.f_back
        while caller is not None and self.where(caller.f_code) is None:
            caller = caller.f_back
        return None if caller is None else self.where(caller.f_code)

    def record(self, frame, kind: str = "path") -> None:
        chain = []
        while frame is not None:
            where = self.where(frame.f_code)
            if where is not None:
                chain.append((where, frame.f_code.co_qualname))
            frame = frame.f_back
        chain.reverse()
        new = []
        for caller, callee in zip(chain, chain[1:]):
            for item in ((kind + ":file", caller[0]), (kind + ":file", callee[0]), (kind + ":call", caller, callee)):
                if item not in self.seen:
                    self.seen.add(item)
                    new.append(item)
        if new:
            if self.out is None:
                self.out = open(os.path.join(self.folder, f"{os.getpid()}.jsonl"), "a", buffering=1)
            for item in new:
                self.out.write(json.dumps(item) + "\n")


def summarise(folder: str) -> dict:
    files = {"path": set(), "old": set()}
    calls = {"path": set(), "old": set()}
    for path in Path(folder).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            kind, what = item[0].split(":")
            if what == "file":
                files[kind].add(item[1])
            else:
                caller, callee = tuple(item[1]), tuple(item[2])
                if caller[0] != callee[0]:
                    calls[kind].add((caller, callee))
    entered = Counter(callee[0] for _, callee in calls["path"])
    everything = calls["path"] | calls["old"]
    climbs = sorted((c, e) for c, e in everything if climbs_a_layer(c[0], e[0]) and e[1] != "<module>")
    old_climbs = sorted((c, e) for c, e in everything if c[0].startswith(SOLVER_FOLDERS) and e[0].startswith(RUNNING))
    return {"files": sorted(files["path"]), "files_with_old_climbs": sorted(files["path"] | files["old"]),
            "calls": sorted(calls["path"]), "entered": dict(entered.most_common()), "climbs": climbs,
            "old_climbs": old_climbs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", default=str(PACKAGE / "inputs" / "data" / "layered150.json"))
    parser.add_argument("--time-limit", default="2")
    parser.add_argument("--json", default=None, help="write the files, calls and climbs here")
    args = parser.parse_args()
    from mallocgame.cli.main import main as cli

    folder = tempfile.mkdtemp(prefix="trace-solve-")
    tracer = Tracer(folder)
    argv = ["solve", args.problem, "--mode", "prefetch", "--solver", "portfolio", "--time-limit", args.time_limit,
            "--quiet"]
    threading.setprofile(tracer.hook)
    sys.setprofile(tracer.hook)
    try:
        cli(argv, prog_name="mallocgame")
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    found = summarise(folder)
    print(f"checkout: {ROOT}  command: mallocgame {' '.join(argv)}  exit: {code}")
    print(f"files: {len(found['files'])}")
    print(f"calls between files: {len(found['calls'])}")
    print("entered (calls into the file from another): " +
          ", ".join(f"{f} {n}" for f, n in found["entered"].items()))
    print(f"climbs (calls up a layer of the layers contract): {len(found['climbs'])}")
    for caller, callee in found["climbs"]:
        print(f"  {caller[0]}:{caller[1]} ({room_of(caller[0])}) -> {callee[0]}:{callee[1]} ({room_of(callee[0])})")
    into_facts = sum(1 for _, callee in found["old_climbs"] if callee[0].startswith(FACTS))
    print(f"old climbs (from a solver into the modules that run solvers; down the layers): {len(found['old_climbs'])} "
          f"({into_facts} into session.py, {len(found['old_climbs']) - into_facts} into the rest)")
    print("files on the path: " + ", ".join(found["files"]))
    more = sorted(set(found["files_with_old_climbs"]) - set(found["files"]))
    print(f"files with the old climbs: {len(found['files_with_old_climbs'])} (more: {', '.join(more) or 'none'})")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
