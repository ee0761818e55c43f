"""Record in the ``xla`` suite's manifest what ``mallocgame suites xla`` lists of each program.

Reading a program's HLO takes seconds (GPT-2 medium's training step most), so the listing reads
these facts (buffers, ops, max live bytes, capacity: :func:`mallocgame.inputs.suites.facts_of`)
from ``mallocgame/inputs/data/xla/suite.json`` instead of building the nine programs.
``experiments/make_xla_suite.py`` runs this after it writes the programs; run it alone after a
change to the HLO importer that changes what it reads::

    nice python experiments/xla_suite_facts.py
"""

from __future__ import annotations

import json
import time

from mallocgame.formats.io import atomic_write_text
from mallocgame.inputs.suites import _xla_dir, facts_of, suite_entries


def write_facts() -> None:
    """Build every program of the suite and write its facts into the manifest (atomically)."""
    path = _xla_dir() / "suite.json"
    manifest = json.loads(path.read_text())
    for entry in suite_entries("xla"):
        t0 = time.monotonic()
        facts = facts_of(entry.build())
        manifest["programs"][entry.name]["facts"] = facts
        print(f"{entry.name}: {facts} ({time.monotonic() - t0:.1f} s to build)", flush=True)
    atomic_write_text(path, json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    write_facts()
