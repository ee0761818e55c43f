"""How the code runs: the budget of time, the incumbent stream, signals, the one forked call, and which
engine (native or Python) runs the compiled parts.

The rooms and their order: docs/architecture.md, "The rooms"."""
