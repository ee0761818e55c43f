"""Doors into other compilers and runtimes (ExecuTorch's memory planner).

Each module here needs an optional extra and imports it lazily."""
