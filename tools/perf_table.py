#!/usr/bin/env python3
"""The memory-bound kernels' table of docs/performance.md from one run's benchmark JSON, and the
cells below the issue's targets.

Reads bench_norms.json, bench_softmax.json and bench_cross_entropy.json from FOLDER (what
tools/device_check.sh writes to $OUT), prints the device, date and copy ceiling of each binary,
then "GB/s (ratio to copy)" per row width for the aligned widths and for the unaligned ones
(the _odd benchmarks), and last the cells under target: forward kernels (the CE forward with
dlogits among them) >= 0.90 of copy from 4K to 256K and >= 0.75 at 1K, backward kernels >= 0.85
from 4K. Missing binaries or benchmarks leave their cells empty ("-").

Usage: tools/perf_table.py FOLDER
       tools/perf_table.py --self-test   (run by tools/ci_checks.sh)
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

# (column title, benchmark binary, benchmark family, forward?)
COLUMNS = [
    ("RMSNorm fwd", "bench_norms", "BM_rms_norm_forward", True),
    ("RMSNorm bwd", "bench_norms", "BM_rms_norm_backward", False),
    ("LayerNorm fwd", "bench_norms", "BM_layer_norm_forward", True),
    ("LayerNorm bwd", "bench_norms", "BM_layer_norm_backward", False),
    ("softmax fwd", "bench_softmax", "BM_softmax_forward", True),
    ("softmax bwd", "bench_softmax", "BM_softmax_backward", False),
    ("CE fwd", "bench_cross_entropy", "BM_cross_entropy_forward", True),
    ("CE fwd + dlogits", "bench_cross_entropy", "BM_cross_entropy_forward_with_gradient", True),
    ("CE bwd", "bench_cross_entropy", "BM_cross_entropy_backward", False),
]


def target(forward: bool, n: int) -> float | None:
    """The issue's target ratio to copy at row width n (None: no target there)."""
    if n >= 4096:
        return 0.90 if forward else 0.85
    if n == 1024 and forward:
        return 0.75
    return None


def load(folder: Path) -> tuple[dict[tuple[str, int], tuple[float, float]], list[str]]:
    """(family, width) -> (GB/s, x_copy) over the binaries found, and one line per binary."""
    cells: dict[tuple[str, int], tuple[float, float]] = {}
    lines = []
    for binary in dict.fromkeys(c[1] for c in COLUMNS):
        path = folder / f"{binary}.json"
        if not path.exists():
            lines.append(f"{binary}: no {path.name}")
            continue
        data = json.loads(path.read_text())
        ctx = data.get("context", {})
        lines.append(f"{binary}: {ctx.get('tilekit_device', '?')}, {ctx.get('date', '?')}, "
                     f"copy {float(ctx.get('tilekit_copy_GBps', 0)):.0f} GB/s")
        for run in data.get("benchmarks", []):
            m = re.fullmatch(r"(\w+)/[A-Z]:(\d+)(?:/manual_time)?", run.get("name", ""))
            if m and "GB/s" in run and "x_copy" in run:
                cells[(m.group(1), int(m.group(2)))] = (float(run["GB/s"]), float(run["x_copy"]))
    return cells, lines


def width_label(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def table(cells: dict[tuple[str, int], tuple[float, float]], suffix: str) -> list[str]:
    """Markdown rows for the families + suffix, one per width any of them has."""
    widths = sorted({n for (family, n) in cells if any(family == c[2] + suffix for c in COLUMNS)})
    out = ["| N | " + " | ".join(c[0] for c in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for n in widths:
        row = []
        for _, _, family, _ in COLUMNS:
            cell = cells.get((family + suffix, n))
            row.append(f"{cell[0]:.0f} ({cell[1]:.3f})" if cell else "-")
        out.append(f"| {width_label(n)} | " + " | ".join(row) + " |")
    return out


def misses(cells: dict[tuple[str, int], tuple[float, float]]) -> list[str]:
    """'kernel N: ratio < target' for every aligned cell under its target."""
    out = []
    for title, _, family, forward in COLUMNS:
        for (fam, n), (_, ratio) in sorted(cells.items()):
            goal = target(forward, n)
            if fam == family and goal is not None and ratio < goal:
                out.append(f"{title} {width_label(n)}: {ratio:.3f} < {goal:.2f}")
    return out


def report(folder: Path) -> str:
    cells, lines = load(folder)
    out = lines + ["", "Aligned rows:", ""] + table(cells, "")
    out += ["", "Unaligned rows (_odd):", ""] + table(cells, "_odd")
    under = misses(cells)
    out += ["", f"Under target ({len(under)}):" if under else "Every aligned cell measured meets its target."]
    out += [f"  {u}" for u in under]
    return "\n".join(out)


def self_test() -> int:
    """A made-up run: the table's cells, the empty ones and the targets' edges."""
    def runs(items):
        return [{"name": f"{name}/manual_time", "GB/s": gbps, "x_copy": ratio} for name, gbps, ratio in items]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ctx = {"tilekit_device": "GPU", "date": "today", "tilekit_copy_GBps": 4000.0}
        (folder / "bench_norms.json").write_text(json.dumps({"context": ctx, "benchmarks": runs([
            ("BM_rms_norm_forward/N:1024", 2960.0, 0.74),      # under 0.75
            ("BM_rms_norm_forward/N:4096", 3600.0, 0.90),      # exactly the target: met
            ("BM_rms_norm_backward/N:1024", 2000.0, 0.50),     # no target at 1K
            ("BM_rms_norm_backward/N:4096", 3396.0, 0.849),    # under 0.85
            ("BM_rms_norm_forward_odd/N:1023", 3000.0, 0.70),  # unaligned: no target
        ])}))
        (folder / "bench_cross_entropy.json").write_text(json.dumps({"context": ctx, "benchmarks": runs([
            ("BM_cross_entropy_forward_with_gradient/V:262144", 3500.0, 0.875),  # under 0.90
            ("BM_cross_entropy_forward/V:262144", 3700.0, 0.925),
        ])}))
        text = report(folder)
    expected_misses = ["RMSNorm fwd 1K: 0.740 < 0.75", "RMSNorm bwd 4K: 0.849 < 0.85",
                       "CE fwd + dlogits 256K: 0.875 < 0.90"]
    checks = [
        ("binary line", "bench_norms: GPU, today, copy 4000 GB/s" in text),
        ("missing binary", "bench_softmax: no bench_softmax.json" in text),
        ("cell", "| 4K | 3600 (0.900) | 3396 (0.849) | - |" in text),
        ("odd table", "| 1023 | 3000 (0.700) | - |" in text),
        ("CE cells", "3700 (0.925) | 3500 (0.875) | - |" in text),
        ("misses", f"Under target ({len(expected_misses)}):" in text and all(m in text for m in expected_misses)),
    ]
    failed = [name for name, ok in checks if not ok]
    if failed:
        print(text)
        print("perf_table self-test failed:", ", ".join(failed), file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "--self-test":
        return self_test()
    print(report(Path(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
