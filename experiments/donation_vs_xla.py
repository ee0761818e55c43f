"""Does the HLO importer's max live equal XLA's own on real training steps with donated state?

Issue 19, item 6. Compiles, with JAX on XLA:CPU (the flags and the dump of
``make_hlo_fixtures.py``: ``--xla_cpu_experimental_ynn_fusion_type=`` plus ``--xla_dump_to``),
training steps whose parameters and optimizer state are donated (``donate_argnums``):

* ``resnet50-train-sgdm`` -- a real ResNet-50 (7x7 stem, max pool, bottleneck blocks
  [3, 4, 6, 3] of widths 64-512 with expansion 4, batch norm, 1000 classes), one SGD step with
  momentum, parameters and velocity donated (``--image`` and ``--batch``, default 224 and 2);
* the ``xla`` suite's training steps with donated state, built by ``make_xla_suite.py``'s own
  functions: the GPT-2 Adam steps (params, m, v donated), the LSTM SGD steps and ResNet-20.

For each it prints XLA's assigned max live (``make_hlo_fixtures._live_range_numbers``: the most
bytes XLA's buffer assignment occupies at one time of its schedule, values sharing storage
counted once; and with XLA's constants live throughout, as their allocations are and as the
importer has them), XLA's ``memory_analysis()`` (arguments + outputs - aliased + temp, an upper
bound that counts every allocation for the whole program), and the importer's max live of the
same text (``mallocgame.importers.hlo.parse_hlo_text`` then ``summarize``, in-place pairs
merged as every reader does), then compares the two op by op (the bytes live in ours at each op
that is an instruction of XLA's sequence against the bytes XLA's assignment occupies there), and
writes the table to ``--out`` (default
``experiments/results/donation_vs_xla.md``).

The programs are compiled from ``ShapeDtypeStruct``s (nothing runs), pytrees passed as they are
(``jax.jit(f, donate_argnums=...)``). ``--library-fusion`` compiles with XLA:CPU's default flags
instead (YNNPACK library fusions on), those of the suite's committed files
(``make_xla_suite.py``), which then differ from these only in parameter order. ResNet-50 at
224x224, batch 2, compiles in about a minute; GPT-2 medium's step takes about 5 minutes.

    nice python experiments/donation_vs_xla.py [--only NAME,...] [--library-fusion] [--image 224] [--batch 2]
                                               [--keep DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import time

import make_hlo_fixtures as fixtures
from _common import ROOT, Transcript, fenced, write_results

show = Transcript()
FIXTURE_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
SUITE_PROGRAMS = ("gpt2-tiny-train-adam", "gpt2-small-train-adam", "gpt2-medium-train-adam",
                  "lstm2-scan128-train", "lstm3-scan150-train", "resnet20-cifar-train")


# --------------------------------------------------------------------------- ResNet-50

def resnet50_train(batch: int, image: int, classes: int = 1000, lr: float = 0.1, momentum: float = 0.9):
    """One SGD-with-momentum step of ResNet-50 (bottleneck [3, 4, 6, 3]); params and velocity donated."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from make_xla_suite import batch_norm, conv, sgd_momentum_step

    s = jax.ShapeDtypeStruct
    f32 = jnp.float32

    def bn(c):
        return s((c,), f32), s((c,), f32)

    params = {"stem": s((7, 7, 3, 64), f32), "stem_bn": bn(64), "blocks": []}
    strides, cin = [], 64
    for i, (width, n) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for j in range(n):
            stride = 2 if j == 0 and i > 0 else 1
            blk = {"w1": s((1, 1, cin, width), f32), "bn1": bn(width),
                   "w2": s((3, 3, width, width), f32), "bn2": bn(width),
                   "w3": s((1, 1, width, 4 * width), f32), "bn3": bn(4 * width)}
            if j == 0:
                blk["ws"], blk["bns"] = s((1, 1, cin, 4 * width), f32), bn(4 * width)
            params["blocks"].append(blk)
            strides.append(stride)
            cin = 4 * width
    params["fc"] = s((cin, classes), f32)
    params["fc_b"] = s((classes,), f32)

    def forward(params, x):
        x = jax.nn.relu(batch_norm(conv(x, params["stem"], 2), *params["stem_bn"]))
        x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        for p, st in zip(params["blocks"], strides):
            y = jax.nn.relu(batch_norm(conv(x, p["w1"]), *p["bn1"]))
            y = jax.nn.relu(batch_norm(conv(y, p["w2"], st), *p["bn2"]))
            y = batch_norm(conv(y, p["w3"]), *p["bn3"])
            short = batch_norm(conv(x, p["ws"], st), *p["bns"]) if "ws" in p else x
            x = jax.nn.relu(y + short)
        return x.mean((1, 2)) @ params["fc"] + params["fc_b"]

    args = (params, params, s((batch, image, image, 3), f32), s((batch,), jnp.int32))
    return sgd_momentum_step(forward, lr, momentum), args, (0, 1)


# --------------------------------------------------------------------------- measuring

@contextlib.contextmanager
def constants_live_throughout(module_name: str):
    """Within the block, the fixtures' functions read every constant of XLA's dumps as live throughout.

    XLA's live-range report gives a constant the span from its place in the sequence to its
    last use, but the buffer assignment puts each constant in a ``constant`` allocation of its
    own that nothing else uses, for the whole run -- as the importer does (kind ``weight``).
    The report's text is rewritten to say so and read by the fixtures' own functions.
    """
    assignment = fixtures._dump_file(module_name, "buffer-assignment.txt")
    constants = set(re.findall(r"^allocation \d+: size \d+, constant:\n value: <\d+ (\S+) @", assignment, re.M))
    original = fixtures._dump_file

    def rewritten(name: str, suffix: str) -> str:
        text = original(name, suffix)
        if suffix != "live-range.txt":
            return text
        horizon = re.search(r"HloLiveRange \(max (\d+)\)", text).group(1)
        return re.sub(r"^    (\S+)\{\}:(\d+)-(\d+)$",
                      lambda m: f"    {m.group(1)}{{}}:0-{horizon}" if m.group(1) in constants else m.group(0),
                      text, flags=re.M)

    fixtures._dump_file = rewritten
    try:
        yield
    finally:
        fixtures._dump_file = original


def timeline(module_name: str, problem) -> dict:
    """Ours vs XLA op by op: at each op of ``problem`` (in-place pairs merged) that is an instruction of
    XLA's sequence (the copies of a loop body the importer expands are not), the bytes live in ours
    against the bytes XLA's assignment occupies there (read with constants live throughout)."""
    import numpy as np

    from mallocgame.problem.intervals import live_profile

    text = fixtures._dump_file(module_name, "live-range.txt")
    position = {name: int(t) for t, name in re.findall(r"^    (\d+):(\S+)$", text, re.M)}
    _, occupied = fixtures._live_and_occupied_bytes(*fixtures._xla_values(module_name))
    times, live = live_profile(problem)
    ours = live[np.searchsorted(times, np.arange(len(problem.ops)), side="right") - 1]
    pairs = [(op.id, int(ours[t]), occupied[position[op.id]]) for t, op in enumerate(problem.ops) if op.id in position]
    above = max(pairs, key=lambda x: x[1] - x[2])
    below = max(pairs, key=lambda x: x[2] - x[1])
    return {"compared": len(pairs), "equal": sum(1 for _, o, x in pairs if o == x),
            "above": sum(1 for _, o, x in pairs if o > x), "most_above": (above[1] - above[2], above[0]),
            "below": sum(1 for _, o, x in pairs if o < x), "most_below": (below[2] - below[1], below[0])}


def programs(image: int, batch: int) -> dict:
    """name -> (builder returning (fn, args, donate_argnums), description)."""
    import make_xla_suite as suite

    out = {"resnet50-train-sgdm": (lambda: resnet50_train(batch, image),
                                   f"ResNet-50 (bottleneck [3,4,6,3]), {image}x{image}, batch {batch}, batch norm; "
                                   "one SGD-momentum step, params and velocity donated")}
    for name in SUITE_PROGRAMS:
        out[name] = suite.PROGRAMS[name]
    return out


def measure(name: str, make, keep: str | None) -> dict:
    """Compile ``name`` with dumps on, and return XLA's numbers and the importer's for its text."""
    import jax

    from mallocgame.importers.hlo import parse_hlo_text, summarize
    from mallocgame.problem.aliasing import merge_inplace

    fn, args, donate = make()
    module = name.replace("-", "_")

    def program(*a):
        return fn(*a)

    program.__name__ = module
    t0 = time.perf_counter()
    compiled = jax.jit(program, donate_argnums=donate).lower(*args).compile()
    text = compiled.as_text()
    seconds = time.perf_counter() - t0
    mem = compiled.memory_analysis()
    live = fixtures._live_range_numbers(f"jit_{module}")
    t1 = time.perf_counter()
    problem = parse_hlo_text(text, f"{name}.hlo.txt", name=name).problem
    ours = summarize(problem)
    import_seconds = time.perf_counter() - t1
    with constants_live_throughout(f"jit_{module}"):
        live_constants = fixtures._live_range_numbers(f"jit_{module}")
        ops = timeline(f"jit_{module}", merge_inplace(problem))
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, f"{name}.hlo.txt"), "w") as fh:
            fh.write(text)
        for suffix in ("buffer-assignment.txt", "live-range.txt"):
            with open(os.path.join(keep, f"{name}.{suffix}"), "w") as fh:
                fh.write(fixtures._dump_file(f"jit_{module}", suffix))
    upper = (mem.argument_size_in_bytes + mem.output_size_in_bytes - mem.alias_size_in_bytes
             + mem.temp_size_in_bytes)
    return {"name": name, "text_chars": len(text), "ynn_fusions": text.count('"kind":"__ynn_fusion"'),
            "compile_s": seconds, "import_s": import_seconds,
            "buffers": ours.buffers, "ops": ours.ops, "ours": ours.max_live_bytes,
            "xla_assigned": live["assigned_max_live_bytes"], "xla_assigned_time": live["assigned_max_live_time"],
            "xla_values": live["values"],
            "xla_constants": live_constants["assigned_max_live_bytes"], "memory_analysis": upper,
            "alias": mem.alias_size_in_bytes, "temp": mem.temp_size_in_bytes, "timeline": ops}


def table(rows: list[dict]) -> str:
    """The markdown table of the module docstring, one row per program."""
    head = ("| program | buffers (ours) | XLA values | XLA assigned max live | ours | ours / XLA | ours - XLA | "
            "XLA, constants live throughout | ours - that | ops equal to XLA / in XLA's sequence | "
            "memory_analysis args+out-alias+temp |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['name']} | {r['buffers']:,} | {r['xla_values']:,} | {r['xla_assigned']:,} | {r['ours']:,} | "
        f"{r['ours'] / r['xla_assigned']:.6f} | {r['ours'] - r['xla_assigned']:,} | {r['xla_constants']:,} | "
        f"{r['ours'] - r['xla_constants']:,} | {r['timeline']['equal']:,} / {r['timeline']['compared']:,} | "
        f"{r['memory_analysis']:,} |\n" for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated program names (default: all)")
    ap.add_argument("--image", type=int, default=224, help="ResNet-50's image side (default 224)")
    ap.add_argument("--batch", type=int, default=2, help="ResNet-50's batch (default 2)")
    ap.add_argument("--library-fusion", action="store_true",
                    help="compile with XLA:CPU's default flags, YNNPACK library fusions on (as make_xla_suite.py's "
                         "committed files), instead of make_hlo_fixtures.py's --xla_cpu_experimental_ynn_fusion_type=")
    ap.add_argument("--keep", default=None, help="also write each program's HLO text and XLA dumps to this folder")
    ap.add_argument("--out", default="donation_vs_xla.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    fixtures._load_jax()  # sets XLA_FLAGS before jax is imported (make_xla_suite imports it at the top)
    if args.library_fusion:  # read when the CPU backend starts, at the first compile: not yet
        os.environ["XLA_FLAGS"] = os.environ["XLA_FLAGS"].replace(FIXTURE_FLAG, "").strip()
    flags = os.environ["XLA_FLAGS"].replace(fixtures.DUMP_DIR, "DIR")
    known = programs(args.image, args.batch)
    names = args.only.split(",") if args.only else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown program {unknown[0]!r} (known: {', '.join(known)})")
    rows = []
    for name in names:
        make, description = known[name]
        r = measure(name, make, args.keep)
        rows.append(r)
        show(f"{name}: {description}")
        if r["ynn_fusions"]:
            show(f"  {r['ynn_fusions']} YNNPACK library fusions in the text")
        show(f"  {r['text_chars']:,} chars of HLO, compiled in {r['compile_s']:.1f} s, imported in "
             f"{r['import_s']:.1f} s; buffers={r['buffers']:,} ops={r['ops']:,}; XLA assigned max live "
             f"{r['xla_assigned']:,} (at {r['xla_assigned_time']}), ours {r['ours']:,}, ratio "
             f"{r['ours'] / r['xla_assigned']:.6f}; XLA with constants live throughout {r['xla_constants']:,}; "
             f"memory_analysis {r['memory_analysis']:,} "
             f"(temp {r['temp']:,}, aliased {r['alias']:,})")
        o = r["timeline"]
        show(f"  op by op (constants live throughout): {o['compared']:,} of our ops are in XLA's sequence; equal at "
             f"{o['equal']:,}, ours above at {o['above']:,} (most {o['most_above'][0]:,} at {o['most_above'][1]}), "
             f"below at {o['below']:,} (most {o['most_below'][0]:,} at {o['most_below'][1]})")
    shutil.rmtree(fixtures.DUMP_DIR, ignore_errors=True)
    import jax
    import jaxlib

    text = ("# Imported max live vs XLA's on training steps with donated state (issue 19, item 6)\n\n"
            f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, XLA:CPU, XLA_FLAGS `{flags}` "
            + ("(XLA:CPU's defaults, library fusions on, as make_xla_suite.py's files, plus the dump). "
               if args.library_fusion else "(make_hlo_fixtures.py's). ")
            + f"ResNet-50 at {args.image}x{args.image}, batch {args.batch}. "
            "XLA assigned max live: make_hlo_fixtures._live_range_numbers's `assigned_max_live_bytes`; ours: "
            "`summarize(parse_hlo_text(text)).max_live_bytes` of the same `compiled.as_text()`.\n\n"
            + table(rows) + "\n" + fenced(show.text))
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
