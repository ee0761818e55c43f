"""The bounds printed beside every answer (max live, the no-fragmentation relaxation, the residency bound)
and their cache on disk.

The rooms and their order: docs/architecture.md, "The rooms"."""
