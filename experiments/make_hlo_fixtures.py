"""Generate the committed HLO test fixtures (``tests/data/*.hlo.txt`` + ``*.expected.json``).

JAX is a dev tool here, not a dependency of mallocgame: install it only to re-run this
script (``pip install jax jaxlib``; CPU is enough). The tests read the committed files and
never import JAX.

For each small program (a transformer forward, unrolled and scanned, its training step, a
CNN, an MLP SGD step whose parameters are donated, and a dense linear solve whose LAPACK calls
write over their operands) this writes

* ``tests/data/NAME.hlo.txt`` -- ``jax.jit(f).lower(...).compile().as_text()``, the
  scheduled after-optimizations HLO (``is_scheduled=true``);
* ``tests/data/NAME.expected.json`` -- XLA's own numbers for the same compilation:
  ``compiled.cost_analysis()`` (flops, transcendentals, bytes accessed),
  ``compiled.memory_analysis()`` (argument/output/alias/temp bytes) and the peak of XLA's
  live-range report (``*-live-range.txt`` from ``--xla_dump_to``: the "Live ranges at T
  (peak)" section, which counts parameters as live for the whole program and outputs to the
  end) -- both the report's own "(peak)" listing and the true maximum over its live ranges
  -- and the maximum of the bytes XLA's buffer assignment occupies under its schedule
  (values sharing storage counted once; see ``_live_range_numbers``), plus the jax/jaxlib
  versions and the XLA flags used.

XLA's CPU backend by default wraps whole programs into one library ("ynn") fusion, which
would turn a transformer into one or two ops; the fixtures are compiled with
``--xla_cpu_experimental_ynn_fusion_type=`` (empty: no library fusion) so that the schedule
has the dots, loop fusions and reduces a TPU/GPU compile would show.

XLA's cost analysis counts a ``while`` loop's body once (not times its trip count). The
scanned transformer therefore also records the flops of the same math unrolled
(``reference_flops``), which is what the importer, counting the body ``trip_count`` times,
must match.

Run from the project root:  ``python experiments/make_hlo_fixtures.py [--out PATH]``  (about 20 s).
Besides the fixtures, it writes what it printed to ``--out`` (default
``experiments/results/hlo_fixtures.md``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile

from _common import ROOT, Transcript, fenced, write_results

OUT = os.path.join(ROOT, "tests", "data")
show = Transcript()
# Set by _load_jax(): XLA reads its flags when jax is first imported, so the import waits for them.
DUMP_DIR = ""
jax = jnp = jaxlib = np = None


def _load_jax() -> None:
    """Point XLA's dumps at a fresh temp folder, then import jax (the dev-only dependency)."""
    global DUMP_DIR, jax, jnp, jaxlib, np
    DUMP_DIR = tempfile.mkdtemp(prefix="hlo_dump_")
    os.environ["XLA_FLAGS"] = f"--xla_cpu_experimental_ynn_fusion_type= --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
        import jaxlib
        import numpy as np
    except ImportError as exc:
        raise SystemExit(f"{exc}: this script needs JAX (pip install jax jaxlib)") from None

# ----------------------------------------------------------------- a small transformer

D, HEADS, SEQ, BATCH, FF, LAYERS = 64, 4, 32, 2, 256, 2


def _layer_params(key):
    ks = jax.random.split(key, 4)
    s = 0.05
    return {
        "wqkv": jax.random.normal(ks[0], (D, 3 * D)) * s,
        "wo": jax.random.normal(ks[1], (D, D)) * s,
        "w1": jax.random.normal(ks[2], (D, FF)) * s,
        "w2": jax.random.normal(ks[3], (FF, D)) * s,
        "g1": jnp.ones((D,)), "b1": jnp.zeros((D,)),
        "g2": jnp.ones((D,)), "b2": jnp.zeros((D,)),
    }


def _layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def _block(x, p):
    h = _layernorm(x, p["g1"], p["b1"])
    qkv = h @ p["wqkv"]                                   # [B, S, 3D]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    def split(t):
        return t.reshape(BATCH, SEQ, HEADS, D // HEADS).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    att = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(D // HEADS)
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    att = jnp.where(mask, att, -1e9)
    att = jax.nn.softmax(att, axis=-1)
    o = (att @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D)
    x = x + o @ p["wo"]
    h = _layernorm(x, p["g2"], p["b2"])
    x = x + jax.nn.gelu(h @ p["w1"], approximate=True) @ p["w2"]
    return x


def transformer_fwd(x, params):
    for p in params:
        x = _block(x, p)
    return x


def transformer_scan_fwd(x, stacked):
    x, _ = jax.lax.scan(lambda h, p: (_block(h, p), None), x, stacked)
    return x


def transformer_train(x, params, target):
    def loss(params):
        return ((transformer_fwd(x, params) - target) ** 2).mean()
    value, grads = jax.value_and_grad(loss)(params)
    return value, grads


# ----------------------------------------------------------------- a small CNN

def cnn_fwd(x, w1, w2, wd):
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)
    h = jax.nn.relu(h)
    h = jax.lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=dn)
    h = jax.nn.relu(h)
    h = jax.lax.reduce_window(h, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    h = h.reshape(h.shape[0], -1)
    return jax.nn.log_softmax(h @ wd)


# ----------------------------------------------------------------- an SGD step with donated parameters

MLP = (64, 256, 256, 10)


def mlp_sgd_donated(params, x, y):
    """One SGD step of an MLP; the parameters are donated, so XLA writes the new ones in their place."""
    def loss(params):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return ((h @ w + b - y) ** 2).mean()
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)


# ----------------------------------------------------------------- a dense linear solve (library calls)

def linalg_solve(a, b, s):
    """``a x = b`` by LU and a Cholesky factor of ``s``: XLA:CPU calls LAPACK (getrf, trsm, potrf) as custom calls
    that write their outputs over their operands (``output_to_operand_aliasing``)."""
    return jnp.linalg.solve(a, b), jnp.linalg.cholesky(s @ s.T + 64.0 * jnp.eye(s.shape[0]))


# ----------------------------------------------------------------- dumping

def _dump_file(module_name: str, suffix: str) -> str:
    files = sorted(glob.glob(os.path.join(DUMP_DIR, f"module_*.{module_name}.cpu_after_optimizations-{suffix}")))
    if not files:
        raise SystemExit(f"no {suffix} for {module_name} in {DUMP_DIR}")
    return open(files[-1]).read()


def _xla_values(module_name: str):
    """XLA's values from the dumps: ``[(name, start, end)]`` live ranges (inclusive), each value's
    size and ``(allocation, offset, size)`` from the buffer assignment, and the schedule's last time."""
    text = _dump_file(module_name, "live-range.txt")
    ranges = re.findall(r"^    (\S+):(\d+)-(\d+)$", text, re.M)
    assignment = _dump_file(module_name, "buffer-assignment.txt")
    sizes, placed = {}, {}
    allocation = -1
    for line in assignment.splitlines():
        a = re.match(r"allocation (\d+):", line)
        if a:
            allocation = int(a.group(1))
            continue
        v = re.match(r" value: <\d+ (\S+)(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\)", line)
        if v:
            name = v.group(1) if "{" in v.group(1) else v.group(1) + "{}"
            sizes[name] = int(v.group(2))
            placed[name] = (allocation, int(v.group(3)), int(v.group(2)))
    horizon = int(re.search(r"HloLiveRange \(max (\d+)\)", text).group(1))
    return ranges, sizes, placed, horizon


def _live_and_occupied_bytes(ranges, sizes, placed, horizon) -> tuple[list[int], list[int]]:
    """Per time of XLA's schedule: the bytes of the live values, and the bytes their storage occupies
    (the union per allocation of their ``[offset, offset + size)``; see ``_live_range_numbers``)."""
    profile = [0] * (horizon + 2)
    live_at: list[list[str]] = [[] for _ in range(horizon + 2)]
    for name, start, end in ranges:
        for t in range(int(start), int(end) + 1):
            profile[t] += sizes.get(name, 0)
            live_at[t].append(name)
    occupied = []
    for names in live_at:
        spans: dict[int, list[tuple[int, int]]] = {}
        for name in names:
            if name in placed:
                alloc, offset, size = placed[name]
                spans.setdefault(alloc, []).append((offset, offset + size))
        total = 0
        for intervals in spans.values():
            hi = -1
            for lo, end in sorted(intervals):
                total += max(0, end - max(lo, hi))
                hi = max(hi, end)
        occupied.append(total)
    return profile, occupied


def _live_range_numbers(module_name: str) -> dict:
    """XLA's live-range report and buffer assignment, summarised three ways.

    * ``report_peak_bytes``: the sum of the values the report lists under "Live ranges at T
      (peak)". XLA picks T with an event sweep that adds the values starting at a time before
      removing those that ended just before it, so T is not always the true maximum.
    * ``max_live_bytes``: the true maximum over time T of the bytes of values whose XLA live
      range ``start-end`` (inclusive) contains T, with each value's size taken from the
      buffer assignment (values it does not list, i.e. tuple index tables, count 0). Values
      that share storage (an op writing its output over a dying operand, a donated parameter
      and its output) are counted once each, as if they did not.
    * ``assigned_max_live_bytes``: the maximum over T of the bytes XLA's buffer assignment
      actually occupies at T: the union, per allocation, of the byte ranges
      ``[offset, offset + size)`` of the values live at T. Values sharing storage count once;
      fragmentation (free bytes between them) does not count. This is the figure the
      importer's workload, with its in-place pairs merged, must reproduce.
    """
    text = _dump_file(module_name, "live-range.txt")
    m = re.search(r"Live ranges at (\d+) \(peak\):\n((?:    .*\n)*)", text)
    if not m:
        raise SystemExit(f"{module_name}: no peak section in the live-range report")
    listed = re.findall(r"^\s+(\S+): (\d+) bytes", m.group(2), re.M)
    ranges, sizes, placed, horizon = _xla_values(module_name)
    profile, occupied = _live_and_occupied_bytes(ranges, sizes, placed, horizon)
    peak = max(profile)
    assigned = max(occupied)
    return {"report_peak_time": int(m.group(1)), "report_peak_bytes": sum(int(b) for _, b in listed),
            "max_live_bytes": peak, "max_live_time": profile.index(peak),
            "assigned_max_live_bytes": assigned, "assigned_max_live_time": occupied.index(assigned),
            "values": len(ranges), "values_without_size": sum(1 for n, _, _ in ranges if n not in sizes),
            "sequence_length": horizon}


def dump(name, fn, *args, reference_flops=None, note="", donate_argnums=()):
    fn.__name__ = name
    compiled = jax.jit(fn, donate_argnums=donate_argnums).lower(*args).compile()
    text = compiled.as_text()
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older jax returns a list with one dict
        cost = cost[0]
    mem = compiled.memory_analysis()
    live = _live_range_numbers(f"jit_{name}")
    expected = {
        "name": name,
        "note": note,
        "jax": jax.__version__, "jaxlib": jaxlib.__version__,
        "xla_flags": "--xla_cpu_experimental_ynn_fusion_type=",
        "cost_analysis": {"flops": cost["flops"], "transcendentals": cost.get("transcendentals", 0.0),
                          "bytes_accessed": cost.get("bytes accessed", 0.0)},
        "memory_analysis": {k: getattr(mem, k) for k in (
            "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")},
        "live_range_report": live,
    }
    if reference_flops is not None:
        expected["reference_flops"] = reference_flops
    with open(os.path.join(OUT, f"{name}.hlo.txt"), "w") as fh:
        fh.write(text)
    with open(os.path.join(OUT, f"{name}.expected.json"), "w") as fh:
        json.dump(expected, fh, indent=1)
        fh.write("\n")
    show(f"{name}: {len(text)} chars, flops={cost['flops']:.0f}, "
         f"transcendentals={cost.get('transcendentals', 0):.0f}, max_live={live['max_live_bytes']}, "
         f"assigned_max_live={live['assigned_max_live_bytes']}, "
         f"report_peak={live['report_peak_bytes']}, "
         f"temp={mem.temp_size_in_bytes}")
    return expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="hlo_fixtures.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    _load_jax()
    os.makedirs(OUT, exist_ok=True)
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (BATCH, SEQ, D))
    params = [_layer_params(k) for k in jax.random.split(key, LAYERS)]
    fwd = dump("transformer_fwd", transformer_fwd, x, params,
               note=f"{LAYERS}-layer pre-LN transformer forward, D={D}, heads={HEADS}, seq={SEQ}, "
                    f"batch={BATCH}, ff={FF}; layers unrolled")
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *params)
    dump("transformer_scan_fwd", transformer_scan_fwd, x, stacked,
         reference_flops={"flops": fwd["cost_analysis"]["flops"],
                          "transcendentals": fwd["cost_analysis"]["transcendentals"],
                          "source": "transformer_fwd (same math, layers unrolled)"},
         note="same transformer with lax.scan over the layers (a while loop, known_trip_count=2)")
    dump("transformer_train", transformer_train, x, params[:1], jnp.zeros_like(x),
         note="loss and gradients (jax.value_and_grad) of a 1-layer transformer (same sizes); "
              "one layer keeps the committed text near 100 KB")
    xc = jax.random.normal(key, (2, 16, 16, 3))
    w1 = jax.random.normal(key, (3, 3, 3, 8)) * 0.1
    w2 = jax.random.normal(key, (3, 3, 8, 16)) * 0.1
    wd = jax.random.normal(key, (4 * 4 * 16, 10)) * 0.1
    dump("cnn_fwd", cnn_fwd, xc, w1, w2, wd,
         note="conv3x3 SAME stride 1 -> relu -> conv3x3 SAME stride 2 -> relu -> 2x2 avg pool -> dense -> log_softmax")
    keys = jax.random.split(key, len(MLP))
    mlp = [(jax.random.normal(k, (a, b)) * 0.1, jnp.zeros((b,))) for k, a, b in zip(keys, MLP[:-1], MLP[1:])]
    dump("mlp_sgd_donated", mlp_sgd_donated, mlp, jax.random.normal(keys[-1], (32, MLP[0])), jnp.zeros((32, MLP[-1])),
         donate_argnums=(0,),
         note=f"one SGD step of an MLP {'-'.join(map(str, MLP))}, batch 32, parameters donated "
              "(input_output_alias: the new parameters are written over the old)")
    ka, kb, ks = jax.random.split(key, 3)
    dump("linalg_solve", linalg_solve, jax.random.normal(ka, (64, 64)), jax.random.normal(kb, (64, 8)),
         jax.random.normal(ks, (32, 32)),
         note="jnp.linalg.solve of a 64x64 system with 8 right-hand sides and jnp.linalg.cholesky of a 32x32 matrix: "
              "LAPACK custom calls (getrf, trsm, potrf) with output_to_operand_aliasing")
    write_results(args.out, (
        "# HLO test fixtures\n\n"
        f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, XLA flags `--xla_cpu_experimental_ynn_fusion_type=`; "
        "wrote `tests/data/NAME.hlo.txt` and `tests/data/NAME.expected.json` for each program below.\n\n"
        + fenced(show.text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
