"""The solve engine: the request and its budget, the solver protocol and registry, the shared facts (the
session), the one solve path, the report, the pools, compare and the conformance checks.

The rooms and their order: docs/architecture.md, "The rooms"."""
