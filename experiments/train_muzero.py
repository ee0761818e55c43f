"""Train (optionally), evaluate and ship the muzero solver's checkpoint; writes results/muzero_training.md.

    nice python experiments/train_muzero.py --run --ship    # train as below, then summarise and ship
    nice python experiments/train_muzero.py --ship --tune   # summarise an existing run in --dir
    ... [--out PATH]                                         # results file (default results/muzero_training.md)

The training command (``mallocgame train``) is fixed in ``COMMAND`` so the record says
exactly what produced the shipped ``search/muzero/checkpoints/selfplay.pt`` (the default network of
the earlier searches, ``method=gumbel|puct``; it was ``default.pt`` until issue 10). The summary
shows the log by tenths of the run and a held-out evaluation (problems the training
stream never draws): the game's greedy episode vs the network's policy alone (no search)
vs search with the learned model and with the simulator, at 8 simulations per move.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from pathlib import Path

from _common import ROOT, run_mallocgame, write_results

TRAIN_ARGS = ["--steps", "100000", "--time-budget", "1680", "--model", "simulator", "--search", "gumbel",
              "--simulations", "8", "--games-per-iter", "4", "--updates-per-iter", "16", "--order", "xla",
              "--k", "16", "--min-size", "16", "--max-size", "64", "--seed", "0",
              # selfplay.pt trained before these existed; they are on by default since (issue 10, model=learned)
              "--consistency-weight", "0", "--reanalyse-fraction", "0"]
SHIPPED = ROOT / "search" / "muzero" / "checkpoints" / "selfplay.pt"


def command(run_dir: Path) -> list[str]:
    return ["mallocgame", "train", *TRAIN_ARGS, "--out", str(run_dir / "train.pt"), "--export",
            str(run_dir / "default.pt")]


def evaluate(model_path: Path, simulations: int = 8) -> list[str]:
    import numpy as np

    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.problems import Recipe
    from mallocgame.search.muzero.search import SearchConfig
    from mallocgame.search.muzero.selfplay import Agent
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.search.muzero.train import greedy_return

    net, payload = load_inference(str(model_path))
    make = game_factory(payload["game"])
    recipes = [Recipe(kind, n, seed, 0.4) for kind, n, seed in
               [("layered", 40, 11), ("layered", 60, 12), ("layered", 100, 13), ("layered", 200, 14),
                ("intervals", 40, 15), ("intervals", 80, 16)]]
    rows = ["| problem | greedy | policy only | learned model | simulator |", "|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {"policy": [], "learned": [], "simulator": []}
    for r in recipes:
        greedy = greedy_return(make(r))
        cells = []
        for name in ratios:
            agent = Agent(net, SearchConfig(simulations=0 if name == "policy" else simulations, gumbel_scale=0.0),
                          "simulator" if name == "simulator" else "learned")
            game, rng = make(r), np.random.default_rng(0)
            while not game.done:
                game.step(agent.search(game, rng).action)
            ratios[name].append(game.total_reward() / greedy)
            cells.append(f"{game.total_reward():.4f} ({ratios[name][-1]:.3f}x)")
        rows.append(f"| {r.kind}-{r.n}-s{r.seed} | {greedy:.4f} | " + " | ".join(cells) + " |")
    rows.append("| mean ratio to greedy | 1 | " + " | ".join(f"{statistics.mean(v):.4f}" for v in ratios.values())
                + " |")
    return rows


def tune_c_scale(model_path: Path, simulations: int = 16) -> list[str]:
    """Return / greedy's for Gumbel's ``c_scale`` (weight of searched Q vs prior) on tuning seeds 201-206.

    These seeds are neither in training (>= TRAIN_SEED_BASE) nor in the comparison (101-108).
    """
    import numpy as np

    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.problems import Recipe
    from mallocgame.search.muzero.search import SearchConfig
    from mallocgame.search.muzero.selfplay import Agent
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.search.muzero.train import greedy_return

    net, payload = load_inference(str(model_path))
    make = game_factory(payload["game"])
    recipes = [Recipe("layered", 60, 201), Recipe("layered", 100, 202), Recipe("intervals", 60, 203),
               Recipe("layered", 80, 204), Recipe("layered", 150, 205), Recipe("intervals", 100, 206)]
    greedy = [greedy_return(make(r)) for r in recipes]
    rows = ["| search | c_scale | " + " | ".join(f"{r.kind}-{r.n}-s{r.seed}" for r in recipes) + " | mean |",
            "|---|---|" + "---|" * (len(recipes) + 1)]
    settings = [("policy only", None)] + [(m, c) for c in (0.1, 0.02, 0.005) for m in ("simulator", "learned")]
    for model, c_scale in settings:
        ratios = []
        for r, g0 in zip(recipes, greedy):
            config = SearchConfig(simulations=0 if c_scale is None else simulations, gumbel_scale=0.0,
                                  c_scale=c_scale or 0.1)
            agent = Agent(net, config, "learned" if model == "policy only" else model)
            game, rng = make(r), np.random.default_rng(0)
            while not game.done:
                game.step(agent.search(game, rng).action)
            ratios.append(game.total_reward() / g0)
        rows.append(f"| {model} | {'-' if c_scale is None else c_scale} | " + " | ".join(f"{x:.4f}" for x in ratios)
                    + f" | {statistics.mean(ratios):.4f} |")
    return rows


def tune_rollouts(simulations: int = 16) -> list[str]:
    """The muzero solver (simulator model) by rollout depth, and plain mcts, on tuning seeds 201-206.

    Ratios are to the game's greedy episode; both solvers return their best complete episode.
    """
    import time

    from mallocgame.engine.runner import run_solver
    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.problems import Recipe, build
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.search.muzero.train import greedy_return

    _, payload = load_inference(str(SHIPPED))
    make = game_factory(payload["game"])
    recipes = [Recipe("layered", 60, 201), Recipe("layered", 100, 202), Recipe("intervals", 60, 203),
               Recipe("layered", 80, 204), Recipe("layered", 150, 205), Recipe("intervals", 100, 206)]
    greedy = [greedy_return(make(r)) for r in recipes]
    rows = ["| solver | rollout depth | " + " | ".join(f"{r.kind}-{r.n}-s{r.seed}" for r in recipes)
            + " | mean | seconds |", "|---|---|" + "---|" * (len(recipes) + 2)]
    settings = [("muzero (simulator)", {"rollout_depth": d}) for d in (0, 16, 48)] + [("mcts", {})]
    for name, options in settings:
        ratios, t0 = [], time.monotonic()
        for r, g0 in zip(recipes, greedy):
            problem, hw = build(r)
            report = run_solver(name.split()[0], problem, hw, time_limit=600, seed=0,
                                options={"simulations": simulations, **options})
            ratios.append(report.objective / report.time_all_slow / g0)
        depth = options.get("rollout_depth", "48 (its default)")
        rows.append(f"| {name} | {depth} | " + " | ".join(f"{x:.4f}" for x in ratios)
                    + f" | {statistics.mean(ratios):.4f} | {time.monotonic() - t0:.0f} |")
    return rows


def log_summary(train_path: Path) -> tuple[list[str], dict]:
    from mallocgame.search.muzero import checkpoint as ckpt

    payload = ckpt.load(str(train_path))
    log = payload["log"]
    consistency = any("consistency" in e for e in log)  # runs before the consistency loss have no column
    rows = ["| steps | games | seconds | self-play return / greedy's (mean over the tenth) | policy loss | value loss | "
            "reward loss | legality loss |" + (" consistency loss |" if consistency else ""),
            "|---|---|---|---|---|---|---|---|" + ("---|" if consistency else "")]
    tenth = max(1, len(log) // 10)
    for i in range(0, len(log), tenth):
        chunk = log[i:i + tenth]
        last = chunk[-1]
        mean = {k: statistics.mean(e.get(k, 0.0) for e in chunk)
                for k in ("vs_greedy", "policy", "value", "reward", "legal", "consistency")}
        rows.append(f"| {last['step']} | {last['games']} | {last['seconds']} | {mean['vs_greedy']:.4f} | "
                    f"{mean['policy']:.3f} | {mean['value']:.4f} | {mean['reward']:.5f} | {mean['legal']:.3f} |"
                    + (f" {mean['consistency']:.4f} |" if consistency else ""))
    return rows, payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/muzero_run", help="where the run's checkpoints and log live")
    parser.add_argument("--run", action="store_true", help="run the training command first (about 30 min)")
    parser.add_argument("--ship", action="store_true", help=f"copy the exported model to {SHIPPED} (the earlier searches' "
                        "network; the guided search's default.pt comes from train_muzero_expert.py)")
    parser.add_argument("--tune", action="store_true", help="also tabulate Gumbel c_scale on tuning seeds")
    parser.add_argument("--out", default="muzero_training.md", help="results file (a bare name: under experiments/results/)")
    args = parser.parse_args()
    run_dir = Path(args.dir).resolve()  # the training runs from the project root
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = command(run_dir)
    if args.run:
        run_mallocgame(cmd[1:], log=run_dir / "train.log")  # cmd[0] is "mallocgame"
    rows, payload = log_summary(run_dir / "train.pt")
    export = run_dir / "default.pt"
    if args.ship:
        shutil.copyfile(export, SHIPPED)
        os.chmod(SHIPPED, 0o644)
    lines = [
        "# mallocMuZero training record",
        "",
        "Produced by `experiments/train_muzero.py`; the shipped checkpoint is "
        "`search/muzero/checkpoints/selfplay.pt` (model only).",
        "",
        "## Command",
        "",
        "```",
        "nice -n 10 " + " ".join(cmd),
        "```",
        "",
        f"Stopped by the time budget at step {payload['step']} after {payload['games']} self-play games. "
        f"The same run without the time budget is `--steps {payload['step']}` instead of "
        f"`--steps 100000 --time-budget 1680` (deterministic under `--seed 0`).",
        "",
        f"Network: {payload['network']}; game: {payload['game']}; training config: {payload['train']}.",
        f"Checkpoint sizes: training state {os.path.getsize(run_dir / 'train.pt')} bytes, "
        f"model only {os.path.getsize(export)} bytes.",
        "",
        "## Log by tenths of the run",
        "",
        *rows,
        "",
        "## Held-out evaluation (8 simulations per move, no greedy fallback)",
        "",
        "Normalised return (fraction of the all-slow time saved) and its ratio to the game's greedy "
        "episode on the same problem.",
        "",
        *evaluate(export),
        "",
    ]
    if args.tune:
        lines += ["## Tuning Gumbel's c_scale (16 simulations per move; return / greedy's)", "",
                  "Seeds 201-206 are used neither in training nor in `compare_muzero_mcts.py` (101-108). "
                  "The solver's defaults come from this table: c_scale 0.1 with the simulator, 0.02 with the "
                  "learned model, and the simulator as the default search model.", "",
                  *tune_c_scale(export), "",
                  "## Tuning the simulator search's rollouts (16 simulations per move; return / greedy's)", "",
                  "Leaf value = return of d greedy moves + the network's value after them (d = 0: pure "
                  "AlphaZero). These rows are the whole solvers (best complete episode: committed path, "
                  "complete rollouts, greedy), so muzero and plain mcts (UCT with greedy rollouts) compare "
                  "like for like. The solver's default rollout depth (48) comes from this table.", "",
                  *tune_rollouts(), ""]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
