"""Reference answers of ``msa`` before its near-linear rewrite (issue 18 item 1): capture and check.

The rewrite of msa's data structures must leave every answer unchanged. The cases: every entry
of the built-in suites with ops (quick, realistic, matmul, sizes) and the HLO fixtures
(tests/data/*.hlo.txt) in prefetch mode at capacity 10%, 25% and 40% of max live; generated
layered workloads of 100 to ~3k buffers; a few runs with other options and with a hint (the
lifted greedy-xla answer committed first). No deadline (the answer must not depend on the clock).

    python -m tests.msa_reference capture   # the frozen copy (tests/msa_reference_impl.py) -> the JSON
    python -m tests.msa_reference check     # the live module against the JSON, every case

tests/test_msa.py checks the small cases in a few seconds. Each stored answer carries a hash of its
problem: where an input has changed since (an importer's fix, say), the check runs the frozen copy on
today's input instead of reading the stored answer.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from mallocgame.hardware.spec import PRESETS

TPU = PRESETS["tpuv4i"]
DATA = Path(__file__).parent / "data"
ANSWERS = DATA / "msa_reference_answers.json"
HLO_FIXTURES = ("bert_convert_fwd", "cnn_fwd", "mlp_sgd_donated", "transformer_fwd", "transformer_scan_fwd",
                "transformer_train")
FRACTIONS = (0.1, 0.25, 0.4)
NO_DEADLINE = 1e18


def _prefetch(problem, fraction):
    from mallocgame.inputs.load import prepare

    return prepare(problem, mode="prefetch", capacity_fraction=fraction, hardware=TPU)[0]


def cases():
    """``(name, build, options)``: ``build()`` returns ``(problem, start)``, ``options`` the keyword options."""
    from mallocgame.importers.hlo import load_hlo
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.suites import suite_entries

    out = []
    for suite in ("quick", "realistic", "matmul", "sizes"):
        for entry in suite_entries(suite):
            for f in FRACTIONS:
                out.append((f"{suite}/{entry.name}@{f}", lambda e=entry, f=f: (_prefetch(e.build(), f), None), {}))
    for name in HLO_FIXTURES:
        for f in FRACTIONS:
            out.append((f"hlo/{name}@{f}",
                        lambda name=name, f=f: (_prefetch(load_hlo(DATA / f"{name}.hlo.txt").problem, f), None), {}))
    for n, seeds in ((100, range(6)), (300, range(4)), (1000, range(2)), (3000, range(1))):
        for seed in seeds:
            for f in (0.05, 0.25, 0.6):
                out.append((f"layered/{n}-s{seed}@{f}", lambda n=n, s=seed, f=f: (_prefetch(layered_network(n, seed=s), f), None),
                            {}))
    for n, seed in ((150, 0), (600, 1)):
        for opts in ({"max_retries": 1}, {"max_retries": 5}, {"max_overlap": "memory"}):
            tag = ",".join(f"{k}={v}" for k, v in opts.items())
            out.append((f"layered/{n}-s{seed}@0.25[{tag}]",
                        lambda n=n, s=seed: (_prefetch(layered_network(n, seed=s), 0.25), None), opts))
        out.append((f"layered/{n}-s{seed}@0.25[hint]", lambda n=n, s=seed: _hinted(_prefetch(layered_network(n, seed=s), 0.25)),
                    {}))
    return out


def _hinted(problem):
    """The problem and the lifted greedy-xla answer's even buffers (a valid partial answer) as the start."""
    from mallocgame.engine.runner import run_solver
    from mallocgame.formats.lift import lift_map_answer

    report = run_solver("greedy-xla", problem.replace(mode="map"), TPU, time_limit=30.0, seed=0)
    return problem, [iv for iv in lift_map_answer(problem, report.offsets) if iv.buffer % 2 == 0]


def answer_key(answer) -> str:
    """A hash of an answer (its intervals, sorted), or ``"none"``."""
    if answer is None:
        return "none"
    rows = sorted((iv.buffer, iv.start, iv.end, -2 if iv.copy_start is None else iv.copy_start, iv.offset) for iv in answer)
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:24]


def problem_key(problem) -> str:
    """A hash of a problem as msa reads it (an importer's change shows as a new key, not as a new answer)."""
    from mallocgame.formats.io import workload_dict

    text = json.dumps(workload_dict(problem, explicit_capacity=True), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def run_case(msa_run, build, options, built=None) -> dict:
    from mallocgame.hardware.prefetch_cost import PrefetchEvaluator

    problem, start = build() if built is None else built
    t0 = time.perf_counter()
    answer, stats = msa_run(problem, TPU, NO_DEADLINE, start=start, **options)
    seconds = time.perf_counter() - t0
    objective = PrefetchEvaluator.of(problem, TPU).value(answer) if answer else 0.0
    return {"key": answer_key(answer), "problem": problem_key(problem), "objective": objective, "intervals": len(answer or ()),
            "buffers": problem.n, "seconds": round(seconds, 3), "timed_out": bool(stats["timed_out"])}


def live_run(problem, hardware, deadline, **kwargs):
    """The live module's msa_run with the options of the algorithm the reference has (no cross-program prefetch)."""
    from mallocgame.algorithms.memory_space_assignment import msa_run

    return msa_run(problem, hardware, deadline, cross_program_prefetch=0, **kwargs)


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "check"
    if what == "capture":
        from tests.msa_reference_impl import msa_run
    else:
        msa_run = live_run
    stored = json.loads(ANSWERS.read_text()) if ANSWERS.exists() else {}
    results, bad = {}, 0
    for name, build, options in cases():
        built = build()
        r = run_case(msa_run, build, options, built)
        results[name] = r
        if what == "check":
            ref = stored.get(name)
            if ref is not None and ref.get("problem") != r["problem"]:  # the input changed (an importer, say)
                from tests.msa_reference_impl import msa_run as frozen

                ref = run_case(frozen, build, options, built)  # the frozen copy on today's input
            same = ref is not None and ref["key"] == r["key"]
            bad += not same
            print(f"{'ok  ' if same else 'DIFF'} {name:55s} n={r['buffers']:5d} {r['seconds']:8.3f}s "
                  f"(reference {ref['seconds'] if ref else '-'}s) objective={r['objective']:.6g}", flush=True)
        else:
            print(f"{name:55s} n={r['buffers']:5d} {r['seconds']:8.3f}s objective={r['objective']:.6g} "
                  f"intervals={r['intervals']}", flush=True)
    if what == "capture":
        ANSWERS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(results)} answers to {ANSWERS}")
        return 0
    print(f"{len(results) - bad} of {len(results)} answers identical to the reference")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
