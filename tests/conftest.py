"""Shared fixtures: benchmark paths and small generated problems."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = Path(os.environ.get("MALLOCGAME_BENCHMARKS", ROOT.parent / "shared" / "benchmarks"))
DATA = ROOT / "mallocgame" / "inputs" / "data"


def experiment_module(name: str):
    """The script ``experiments/<name>.py`` as a module, without running its ``main``: registered in
    ``sys.modules`` (dataclasses look their module up) and loaded with ``experiments/`` on the path (the scripts
    import their sibling ``_common``)."""
    folder = str(ROOT / "experiments")
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(folder)
    return mod


def needs_benchmarks():
    return pytest.mark.skipif(not BENCHMARKS.is_dir(), reason=f"benchmarks not found at {BENCHMARKS}")


def run_cli(*args: str, env: dict | None = None, input: str | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``mallocgame ARGS`` in a fresh interpreter, as a user would (killed after ``timeout`` seconds)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "mallocgame.cli.main", *args], capture_output=True, text=True,
                          env=full_env, input=input, timeout=timeout, cwd=ROOT)
