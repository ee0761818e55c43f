"""No import cycle anywhere in the package: the modules of mallocgame (solvers, search, hybrids and hardware
included) import one another in one direction only (docs/architecture.md, "The solve path").

The graph is grimp's (import-linter's own): every import statement of every module, at the top or inside a
function, but for those under ``if TYPE_CHECKING:`` (they never run).
"""

from __future__ import annotations

import grimp
import networkx as nx


def import_graph(graph: grimp.ImportGraph) -> nx.DiGraph:
    """The direct imports between the graph's modules, as a directed graph (importer -> imported)."""
    digraph = nx.DiGraph()
    for module in graph.modules:
        digraph.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            digraph.add_edge(module, imported)
    return digraph


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Each group of modules that import one another (directly or through each other), sorted."""
    return sorted(sorted(group) for group in nx.strongly_connected_components(import_graph(graph)) if len(group) > 1)


def test_the_package_has_no_import_cycle():
    graph = grimp.build_graph("mallocgame", exclude_type_checking_imports=True)
    assert {"mallocgame.engine.runner", "mallocgame.engine.solving", "mallocgame.engine.pools",
            "mallocgame.search.game"} <= graph.modules
    cycles = import_cycles(graph)
    assert not cycles, "modules that import one another:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_a_planted_cycle_is_found():
    graph = grimp.build_graph("mallocgame", exclude_type_checking_imports=True)
    graph.add_import(importer="mallocgame.problem.model", imported="mallocgame.engine.runner")  # runner imports the model
    assert any({"mallocgame.problem.model", "mallocgame.engine.runner"} <= set(c) for c in import_cycles(graph))
