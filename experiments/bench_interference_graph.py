"""Build time and memory of the interference graph's two forms (mallocgame.problem.graph): the networkx graph and the
clique path, with the time of the questions the solvers ask (components, largest clique, all neighbours),
and a check that both forms give the same answers.

    PYTHONPATH=. nice python experiments/bench_interference_graph.py [--generated N] [--trace CSV ...]

Inputs: the xla suite's GPT-2 Adam steps and its largest program (LSTM, 13k buffers), a generated layered
network of N buffers (default 20000) and the traces given (default: idealloc-somas's pangu_2.6B from the
benchmarks, 18,692 buffers, if present). Memory is tracemalloc's peak during the build, measured in a second
build (tracemalloc slows it). Also the time of ``import networkx`` in a fresh interpreter. Results:
experiments/results/interference_graph.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from mallocgame.formats.io import load_problem
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem.graph import MAX_GRAPH_EDGES, CliquePath, GraphConflicts, interference_graph
from mallocgame.problem.intervals import count_overlapping_pairs, max_live

XLA = ("gpt2-small-train-adam", "gpt2-medium-train-adam", "lstm3-scan150-train")
BENCHMARKS = Path(os.environ.get("MALLOCGAME_BENCHMARKS", Path(__file__).resolve().parents[2] / "shared/benchmarks"))
TRACES = (BENCHMARKS / "idealloc-somas" / "pangu_2.6B.csv",)


def networkx_import_seconds() -> float:
    """Seconds ``import networkx`` takes in a fresh interpreter."""
    code = "import time; t = time.perf_counter(); import networkx; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def timed(make):
    gc.collect()
    t = time.perf_counter()
    out = make()
    return out, time.perf_counter() - t


def peak_mib(make) -> float:
    gc.collect()
    tracemalloc.start()
    out = make()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del out
    return peak / 2**20


def measure(name: str, problem) -> dict:
    a = problem.arrays
    edges, t_count = timed(lambda: count_overlapping_pairs(a.start, a.end))
    row = {"input": name, "buffers": problem.n, "edges": edges, "count_s": t_count}
    path, row["path_s"] = timed(lambda: CliquePath.of(problem, edge_count=edges))
    row["path_mib"] = peak_mib(lambda: CliquePath.of(problem, edge_count=edges))
    row["cliques"] = len(path.times)
    comps, row["path_components_s"] = timed(path.components)
    clique, row["path_clique_s"] = timed(path.largest_clique)
    _, row["path_neighbours_s"] = timed(lambda: [path.neighbours(i) for i in range(problem.n)])
    row["components"], row["largest_component"] = len(comps), max(map(len, comps))
    row["clique_buffers"], row["clique_bytes"] = len(clique), path.clique_bytes(clique)
    assert row["clique_bytes"] == max_live(problem)
    if edges > MAX_GRAPH_EDGES:
        row["graph_s"] = None
        return row
    graph, row["graph_s"] = timed(lambda: interference_graph(problem))
    row["graph_mib"] = peak_mib(lambda: interference_graph(problem))
    form = GraphConflicts(graph)
    g_comps, row["graph_components_s"] = timed(form.components)
    g_clique, row["graph_clique_s"] = timed(form.largest_clique)
    _, row["graph_neighbours_s"] = timed(lambda: [form.neighbours(i) for i in range(problem.n)])
    assert g_comps == comps and g_clique.tolist() == clique.tolist(), f"{name}: the two forms disagree"
    assert graph.number_of_edges() == edges
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=20_000, help="buffers of the generated layered network")
    ap.add_argument("--trace", nargs="*", default=[str(t) for t in TRACES if t.exists()], help="trace CSVs")
    args = ap.parse_args()
    print(f"import networkx in a fresh interpreter: {networkx_import_seconds():.2f} s, "
          f"{networkx_import_seconds():.2f} s\n")
    entries = {e.name: e for e in suite_entries("xla")}
    inputs = [(name, lambda name=name: prepare(entries[name].build(), mode="map")[0]) for name in XLA]
    inputs.append((f"layered_network({args.generated})", lambda: layered_network(args.generated, seed=0)))
    inputs += [(Path(t).name, lambda t=t: load_problem(t)) for t in args.trace]
    print("| input | buffers | edges | cliques | components (largest) | largest clique: buffers, bytes "
          "| clique path: build s, MiB; components, clique, all neighbours s "
          "| networkx graph: build s, MiB; components, clique, all neighbours s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, load in inputs:
        r = measure(name, load())
        path = (f"{r['path_s']:.3f}, {r['path_mib']:.1f}; {r['path_components_s']:.3f}, {r['path_clique_s']:.3f}, "
                f"{r['path_neighbours_s']:.2f}")
        graph = (f"refused (> {MAX_GRAPH_EDGES} edges)" if r["graph_s"] is None else
                 f"{r['graph_s']:.2f}, {r['graph_mib']:.0f}; {r['graph_components_s']:.3f}, "
                 f"{r['graph_clique_s']:.3f}, {r['graph_neighbours_s']:.2f}")
        print(f"| {r['input']} | {r['buffers']} | {r['edges']} | {r['cliques']} | {r['components']} "
              f"({r['largest_component']}) | {r['clique_buffers']}, {r['clique_bytes']} | {path} | {graph} |",
              flush=True)


if __name__ == "__main__":
    main()
