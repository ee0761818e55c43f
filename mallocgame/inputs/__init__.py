"""Inputs: generated workloads and intervals, the built-in suites and the bundled ``example:`` problems."""
