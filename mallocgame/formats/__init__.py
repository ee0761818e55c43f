"""Files and answer forms: the CSV and JSON readers and writers, and map answers read as prefetch intervals.

The rooms and their order: docs/architecture.md, "The rooms"."""
