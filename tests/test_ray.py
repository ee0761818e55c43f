"""``compare --executor ray`` on a real local Ray runtime (issue 12, item 5).

One runtime for the module (``ray.init(num_cpus=2)``); every test runs Ray tasks on it. The
answers go through the same validation as the local path (``runner.run_solver``), rows
stream back as they finish, a task whose worker dies loses only its own row, and
``--out``/``--resume`` behave as they do locally.
"""

from __future__ import annotations

import csv
import os
import signal
import sys
import textwrap
import time

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mallocgame[ray]')")

from mallocgame.engine.comparison import CSV_COLUMNS, run_comparison  # noqa: E402
from mallocgame.engine.protocol import LIMIT_GRACE  # noqa: E402
from mallocgame.formats.io import atomic_write_text, problem_csv_text, write_workload_json  # noqa: E402
from mallocgame.inputs.generate import layered_network, random_intervals  # noqa: E402
from mallocgame.runtime.interrupts import Interrupted  # noqa: E402
from tests.conftest import ROOT, run_cli  # noqa: E402
from tests.test_plugins import make_distribution  # noqa: E402

PLUGIN = textwrap.dedent('''
    import os, subprocess, sys, time
    from dataclasses import dataclass

    from mallocgame import Options, Solver, option

    class Crash(Solver):
        """Kills its own process mid-run."""
        name = "crash"
        modes = frozenset({"map", "pack"})

        def solve(self, request):
            os._exit(3)

    @dataclass(frozen=True)
    class HangOptions(Options):
        hang_file: str = option("", "where the pid of the process it starts is written")

    class Hang(Solver):
        """Starts a process of its own (its pid written to hang_file), then hangs."""
        name = "hang"
        modes = frozenset({"map", "pack"})

        Options = HangOptions

        def solve(self, request):
            hang_file = request.options.hang_file
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open(hang_file + f".{os.getpid()}", "w") as fh:
                fh.write(str(child.pid))
            while True:
                time.sleep(0.05)

    class Stubborn(Solver):
        """Sends all-slow as its answer (map mode), then never returns and never reads its clock."""
        name = "stubborn"
        modes = frozenset({"map"})

        def solve(self, request):
            import numpy as np
            from mallocgame.runtime.incumbents import offer
            offer(value=0.0, offsets=np.full(request.problem.n, -1, np.int64), source="all-slow")
            while True:
                time.sleep(0.05)
''')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray runtime whose workers see the crashing plugin (and this checkout)."""
    site = tmp_path_factory.mktemp("site")
    make_distribution(site, "crash-plugin", "crash = crash_plugin.solver:Crash\nhang = crash_plugin.solver:Hang\n"
                      "stubborn = crash_plugin.solver:Stubborn",
                      {"crash_plugin/__init__.py": "", "crash_plugin/solver.py": PLUGIN})
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(ROOT), old]))
    sys.path.insert(0, str(site))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        sys.path.remove(str(site))
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    write_workload_json(d / "layered.json", layered_network(40, seed=2))
    atomic_write_text(d / "intervals.48.csv",
                      problem_csv_text(random_intervals(30, seed=1, max_size=16, with_benefit=True)))
    return [str(d / "layered.json"), str(d / "intervals.48.csv")]


def key_values(comparison):
    return {(r.input, r.solver): (r.status, r.report.objective if r.report else None) for r in comparison.rows}


def test_ray_tasks_validate_like_local_stream_and_a_crash_loses_only_itself(cluster, inputs, tmp_path):
    out = tmp_path / "r.csv"
    seen = []
    on_ray = run_comparison(inputs, ["greedy-xla", "crash", "best-fit"], time_limit=2, executor="ray",
                            results_path=str(out), on_row=lambda row, done, total: seen.append((done, total)))
    assert ray.is_initialized()  # the runtime it found is left running (it did not start it)
    assert seen == [(k, 6) for k in range(1, 7)]  # every row reported as it finished
    local = run_comparison(inputs, ["greedy-xla", "best-fit"], time_limit=2)
    ray_values = key_values(on_ray)
    for pair, value in key_values(local).items():
        assert ray_values[pair] == value  # the same validated, scored answers
    for inp in ("layered", "intervals"):
        status, _ = ray_values[(inp, "crash")]
        row = next(r for r in on_ray.rows if r.input == inp and r.solver == "crash")
        assert status == "ERROR" and row.error == "solver process died (exit code 3)"
    assert all(r.valid for r in on_ray.rows if r.solver != "crash")
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 7
    assert on_ray.settings["executor"] == "ray"


def test_ray_resume_runs_only_the_missing_pairs(cluster, inputs, tmp_path):
    out = tmp_path / "r.csv"
    run_comparison(inputs[:1], ["greedy-xla"], time_limit=2, executor="ray", results_path=str(out))
    before = out.read_text()
    ran = []
    again = run_comparison(inputs, ["greedy-xla", "best-fit"], time_limit=2, executor="ray", results_path=str(out),
                           resume=True, on_row=lambda row, done, total: ran.append((row.input, row.solver)))
    assert sorted(ran) == [("intervals", "best-fit"), ("intervals", "greedy-xla"), ("layered", "best-fit")]
    assert again.settings["resumed"] == 1 and len(again.rows) == 4 and all(r.valid for r in again.rows)
    after = out.read_text().splitlines()
    assert after[:2] == before.splitlines() and len(after) == 5


def test_interrupt_cancels_ray_tasks_and_kills_what_their_solvers_started(cluster, inputs, tmp_path):
    hang = tmp_path / "hang"

    def on_row(row, done, total):  # the first row is in: wait for the hanging run's own process, then Ctrl-C
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("hang.*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C as an interactive user has it: a job started in the background by a non-interactive
    # shell (CI's, say) inherits SIGINT ignored, and Python then leaves it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Interrupted) as stop:
            run_comparison(inputs[:1], ["greedy-xla", "hang"], time_limit=60, executor="ray", on_row=on_row,
                           solver_options={"hang": {"hang_file": str(hang)}}, results_path=str(tmp_path / "r.csv"))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stop.value.exit_code == 130
    assert [(r.solver, r.valid) for r in stop.value.partial.rows] == [("greedy-xla", True)]
    (pid_file,) = tmp_path.glob("hang.*")
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the hanging solver's process outlived the interrupt"
    assert ray.is_initialized()  # a runtime it did not start is left running
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 2


def test_a_ray_task_keeps_its_runs_limit_as_a_local_parent_does(cluster, inputs, tmp_path):
    """A solver that never reads its clock ends at the limit + LIMIT_GRACE on Ray too: the best answer it sent,
    validated, FEASIBLE, "stopped at the limit"; one that sent nothing is that run's error, as locally."""
    t0 = time.monotonic()
    rows = run_comparison(inputs[:1], ["stubborn", "hang"], time_limit=0.5, executor="ray", jobs=2,
                          solver_options={"hang": {"hang_file": str(tmp_path / "hang")}}).rows
    wall = time.monotonic() - t0
    by_solver = {r.solver: r for r in rows}
    stubborn, hang = by_solver["stubborn"], by_solver["hang"]
    assert stubborn.valid and stubborn.status == "FEASIBLE" and stubborn.report.objective == 0.0
    assert "stopped at the limit" in stubborn.report.stats["stopped_at_limit"]
    assert stubborn.report.stats["source"] == "all-slow"
    assert not hang.valid and "stopped at the limit" in hang.error and "sent no answer" in hang.error
    assert wall < 0.5 + LIMIT_GRACE + 20  # not the matrix's hard limit (2 x limit + 30 s)


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_cli_executor_ray_joins_a_running_cluster(cluster, inputs, tmp_path):
    out = tmp_path / "r.csv"
    r = run_cli("compare", inputs[1], "--solvers", "greedy-xla,best-fit", "--time-limit", "2", "--executor", "ray",
                "--address", cluster, "--out", str(out), "--no-progress", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2 runs on 1 inputs" in r.stdout and "on ray" in r.stdout and "Traceback" not in r.stderr
    assert len(out.read_text().splitlines()) == 3


def test_address_without_ray_executor_is_one_line(inputs):
    r = run_cli("compare", inputs[1], "--solvers", "greedy-xla", "--address", "127.0.0.1:1", timeout=60)
    assert r.returncode == 2 and "--address: only with --executor ray" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("train", "--address", "127.0.0.1:1", timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "error: --address: only with --ray-actors"


def test_unreachable_address_is_one_line_at_once_and_writes_nothing(inputs, tmp_path):
    out = tmp_path / "r.csv"
    r = run_cli("compare", inputs[1], "--solvers", "greedy-xla", "--executor", "ray", "--address", "127.0.0.1:1",
                "--out", str(out), timeout=60)  # Ray alone would retry for minutes
    assert r.returncode == 2 and "cannot reach a Ray cluster at 127.0.0.1:1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_self_play_on_ray_actors_plays_the_seeded_games_in_order_and_trains(cluster):
    pytest.importorskip("torch")
    import numpy as np

    from mallocgame.search.muzero.distributed import RaySelfPlay, _Player
    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.problems import Curriculum, Recipe
    from mallocgame.search.muzero.train import TrainConfig, new_state, train

    fields = {"variant": "order", "k": 4, "order": "xla"}
    make = game_factory(fields)
    config = TrainConfig(games_per_iter=3, updates_per_iter=2, batch_size=4, unroll=2, td_steps=2, simulations=2,
                         curriculum=Curriculum(min_size=6, max_size=8))

    def fresh():
        return new_state(config, 0, make, fields, Recipe("layered", 6, 0))

    state = fresh()
    play = RaySelfPlay(2, fields)
    try:
        train(state, 4, make, play=play)  # two iterations: 2 x 3 games over 2 actors, 4 updates
    finally:
        play.close()
    assert state.step == 4 and state.replay.total_games == 6 and state.replay.positions > 0
    assert ray.is_initialized()  # the runtime it found stays up

    # The first iteration's games, reproduced in this process: the same recipes, seeds and order.
    local = fresh()
    jobs = [(config.curriculum.sample(local.rng), int(local.rng.integers(2**63))) for _ in range(3)]
    weights = {k: v.detach().clone() for k, v in local.net.state_dict().items()}
    games = _Player(fields).play(weights, local.net.config.as_dict(), config.as_dict(), jobs)
    for (traj, _), got in zip(games, state.replay.trajectories[:3]):
        assert traj.recipe == got.recipe
        assert np.array_equal(traj.actions, got.actions) and np.array_equal(traj.rewards, got.rewards)
