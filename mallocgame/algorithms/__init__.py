"""The shared algorithms: placement, XLA's memory-space assignment, the packing model, the
large-neighbourhood-search driver and re-scheduling.

The rooms and their order: docs/architecture.md, "The rooms"."""
