"""Follow ``mallocgame solve PROBLEM --mode prefetch --solver portfolio`` from the CLI to the printed answer.

The hallway, not the rooms: at each milestone of the solve path -- a solver's ``solve`` entered (the portfolio's,
and each member's in its child), an answer judged (``verdict.judge``), the summary line made (``summary``), a
solver calling up into a module that runs solvers (below) -- the stack is walked, and every call between two
consecutive frames of the package (mallocgame/, solvers/, hybrid/, search/, hardware/; frames of the standard
library, click and numpy in between are skipped) is recorded, in the parent and in every forked child (the profile
hook is inherited by a fork; each process appends what it sees first to a file of its own). Printed:

* files: the distinct package files on those stacks;
* calls: the distinct calls (caller function -> callee function) between two different files on them;
* entered: per file, the distinct calls into it from another file;
* climbs: the calls from a solver (solvers/, hybrid/, search/) up into the modules that run solvers (the CLI, the
  API, compare, the runner, the solve path, the report, the pools, the fork primitive, the session), counted in two:
  those into the session (``session.py``: the facts a request hands its solver, ``request.facts``, and the held
  baselines' rules) and those into the rest (the modules that run solvers proper).

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
        if (name == "solve" and here.startswith(SOLVER_FOLDERS)) or name in MILESTONES or self.climbs(frame, here):
            self.record(frame)

    def climbs(self, frame, here: str) -> bool:
        """Is this a call from a solver into a module that runs solvers (the nearest package caller's file)?"""
        if not here.startswith(RUNNING):
            return False
        caller = frame.f_back
        while caller is not None and self.where(caller.f_code) is None:
            caller = caller.f_back
        return caller is not None and self.where(caller.f_code).startswith(SOLVER_FOLDERS)

    def record(self, frame) -> None:
        chain = []
        while frame is not None:
            where = self.where(frame.f_code)
            if where is not None:
                chain.append((where, frame.f_code.co_qualname))
            frame = frame.f_back
        chain.reverse()
        new = []
        for caller, callee in zip(chain, chain[1:]):
            for item in (("file", caller[0]), ("file", callee[0]), ("call", caller, callee)):
                if item not in self.seen:
                    self.seen.add(item)
                    new.append(item)
        if new:
            if self.out is None:
                self.out = open(os.path.join(self.folder, f"{os.getpid()}.jsonl"), "a", buffering=1)
            for item in new:
                self.out.write(json.dumps(item) + "\n")


def summarise(folder: str) -> dict:
    files, calls = set(), set()
    for path in Path(folder).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            if item[0] == "file":
                files.add(item[1])
            else:
                caller, callee = tuple(item[1]), tuple(item[2])
                if caller[0] != callee[0]:
                    calls.add((caller, callee))
    entered = Counter(callee[0] for _, callee in calls)
    climbs = sorted((c, e) for c, e in calls if c[0].startswith(SOLVER_FOLDERS) and e[0].startswith(RUNNING))
    return {"files": sorted(files), "calls": sorted(calls), "entered": dict(entered.most_common()),
            "climbs": climbs}


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
    into_facts = sum(1 for _, callee in found["climbs"] if callee[0].startswith(FACTS))
    print(f"climbs from a solver up into the modules that run solvers: {len(found['climbs'])} "
          f"({into_facts} into the facts handed in the request, session.py; {len(found['climbs']) - into_facts} into "
          f"the rest)")
    for caller, callee in found["climbs"]:
        print(f"  {caller[0]}:{caller[1]} -> {callee[0]}:{callee[1]}")
    print("files on the path: " + ", ".join(found["files"]))
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
