"""Compression bombs cost seconds, and the real inputs stay well under the cap on what a compressed input may expand to.

Each bomb is a gzip file of a CSV header line then N MiB of newlines (about 1 KiB per MiB); each is given
to ``mallocgame info`` in a fresh process (the CLI a user runs), which must refuse it with one line,
exit 2: past the cap naming the file and the cap, under it (255 MiB) "no buffers (header only)".
Printed per run: exit code, wall seconds, the child's peak RSS (``wait4``), the error line. Then the
largest real inputs of the shared benchmarks and the bundled data
(compressed size, size once expanded) beside the cap, and ``info`` on the largest one.

    nice python experiments/bench_hostile_inputs.py [--mib 255,1024,4096] [--benchmarks DIR] [--reference CHECKOUT]
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from _common import ROOT, Transcript, benchmarks_dir, write_results

sys.path.insert(0, str(ROOT))  # the bombs are the bad-input corpus's own (one maker)
from tests.test_bad_inputs import gzip_bomb  # noqa: E402


def run_info(path: Path, timeout: float, code_root: Path = ROOT) -> tuple[int | None, float, float, str]:
    """``mallocgame info PATH`` in a child running the package of ``code_root``: (exit code or None on timeout,
    wall s, peak RSS MB, last stderr line)."""
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "mallocgame.cli.main", "info", str(path)], cwd=code_root,
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return None, time.monotonic() - t0, usage.ru_maxrss / 1024, "(killed at the timeout)"
            time.sleep(0.05)
        wall = time.monotonic() - t0
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    return code, wall, usage.ru_maxrss / 1024, lines[-1] if lines else ""


def expanded_size(path: Path) -> int:
    """Bytes ``path`` holds once expanded (a gzip file's stream, an archive's members; else its size)."""
    if path.name.endswith(".gz"):
        with gzip.open(path) as fh:
            return sum(len(chunk) for chunk in iter(lambda: fh.read(1 << 24), b""))
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return sum(i.file_size for i in z.infolist())
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", default="255,1024,4096",
                    help="bomb sizes once expanded, MiB (comma-separated; 255: just under the default cap)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is killed")
    ap.add_argument("--benchmarks", default=None, help="the shared benchmark folder (default: as compare finds it)")
    ap.add_argument("--reference", default=None, metavar="CHECKOUT",
                    help="also run the bombs of --reference-mib with another checkout's package (the code before)")
    ap.add_argument("--reference-mib", default="255")
    ap.add_argument("--reference-timeout", type=float, default=60.0)
    ap.add_argument("--out", default="hostile_inputs.md")
    args = ap.parse_args(argv)

    from mallocgame.formats.io import max_decompressed

    cap = max_decompressed()
    out = Transcript()
    out("# Compression bombs and the cap on what a compressed input may expand to")
    out()
    out(f"Cap: {cap:,} bytes ({cap / 2**20:g} MiB). Each run is `mallocgame info FILE` in a fresh process; RSS is")
    out("the child's peak (`wait4`). Machine: 2 cores shared with other engineers' jobs, run under nice.")
    out()
    out("| input | on disk | expanded | exit | wall s | peak RSS MB | stderr |")
    out("|---|---|---|---|---|---|---|")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for mib in [int(x) for x in args.mib.split(",") if x]:
            path = Path(tmp) / f"bomb{mib}.csv.gz"
            path.write_bytes(gzip_bomb(mib))
            code, wall, rss, line = run_info(path, args.timeout)
            out(f"| {path.name} | {path.stat().st_size:,} | {mib << 20:,} | {code} | {wall:.2f} | {rss:.0f} | "
                f"`{line.replace(tmp + '/', '')}` |")
            expected = "no buffers (header only)" if mib << 20 <= cap else "the cap on a compressed input"
            if code != 2 or expected not in line:
                failures.append(f"{path.name}: exit {code}: {line}")
            if args.reference and str(mib) in args.reference_mib.split(","):
                code, wall, rss, line = run_info(path, args.reference_timeout, Path(args.reference))
                out(f"| {path.name}, with {args.reference} | {path.stat().st_size:,} | {mib << 20:,} | {code} | "
                    f"{wall:.2f} | {rss:.0f} | `{line.replace(tmp + '/', '')}` |")
    out()
    out("The largest real inputs (compressed ones expanded; an archive: all its members, of which a read takes")
    out("one, or three):")
    out()
    out("| input | on disk | expanded | share of the cap |")
    out("|---|---|---|---|")
    roots = (benchmarks_dir(explicit=args.benchmarks), ROOT / "mallocgame" / "inputs" / "data")
    files = [p for root in roots for p in root.rglob("*") if p.is_file() and p.suffix not in (".md", ".py")]
    sizes = sorted(((expanded_size(p), p) for p in files), key=lambda t: (-t[0], str(t[1])))[:6]
    for size, p in sizes:
        out(f"| {p.name} | {p.stat().st_size:,} | {size:,} | {size / cap:.1%} |")
    largest = next((p for _, p in sizes if p.name.endswith(".gz")), None)
    if largest is not None:
        code, wall, rss, line = run_info(largest, args.timeout)
        out()
        out(f"`mallocgame info {largest.name}` (the largest gzipped input): exit {code}, {wall:.2f} s, "
            f"peak RSS {rss:.0f} MB")
        if code != 0:
            failures.append(f"{largest.name}: exit {code}: {line}")
    out()
    out("FAILED: " + "; ".join(failures) if failures else
        "ok: every bomb refused with one line (past the cap: the cap named), the real input read")
    write_results(args.out, out.text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
