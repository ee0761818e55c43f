"""The model: a problem, its buffers, ops and answers, live ranges and their interference graph, and the plain
vocabulary every layer speaks (the objective's comparison, units, name suggestions).

The rooms and their order: docs/architecture.md, "The rooms"."""
