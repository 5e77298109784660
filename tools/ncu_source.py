#!/usr/bin/env python3
"""Where a kernel's warps stall and which code they run: a summary of ncu's source view (one
line per SASS instruction) of one launch, or of two launches side by side (two builds, base and
ours).

What it prints, per CSV:
  - warp instructions executed, stall samples, and the stall reasons with their share of the
    samples (no_inst = waiting on instruction fetch, barrier = bar.sync / named barriers,
    long_sb = global or local memory, wait = fixed latencies, ...);
  - the hot code: instructions executed at least --hot times per item (per row, say), and the
    distinct 128-byte lines they lie in (the code the warps fetch for every item);
  - with --items: the code as blocks of consecutive instructions of one execution class per
    item (e.g. "1" = one warp per row runs it, "7" = seven warps per row, "0.5" = one warp of
    every other row); the largest blocks that run, in address order, with their samples,
    no_inst samples and most frequent opcodes. Warps of one row that run code of their own (a
    row's tail warp, say) show up as classes of their own. A class mixes warps and rows: 1 per
    row is one warp on every row, or 8 warps on one row in 8 (rows of two kinds); what the
    block does (its opcodes, a test inside it that runs 0.125 times per row) tells which.

Why: ncu's text report gives the stall reasons of the whole kernel; it does not say which code
is hot or which warps run which code. The CE forward + dlogits at odd 16383 columns lost 7% with
2.6% fewer instructions; this view showed instruction-fetch stalls rising in every block
(docs/performance_log.md, "Order-free loads of shifted rows").

Making the CSV, on the device machine (one launch of a benchmark's kernel; --launch-skip past
the warm-up launches):
  ncu --clock-control none --kernel-name regex:row_kernel --launch-skip 3 --launch-count 1 \\
      --section WarpStateStats --section SourceCounters --import-source no -o /tmp/rep \\
      build/bench/bench_cross_entropy --benchmark_filter='with_gradient_odd/V:16383/'
  ncu -i /tmp/rep.ncu-rep --page source --csv --print-source sass > $OUT/ours.csv

Usage: tools/ncu_source.py CSV [BASE_CSV] [--items N] [--hot F] [--blocks K]
       tools/ncu_source.py --self-test
  --items N  items (rows) the launch processed: execution counts become counts per item.
             The row benchmarks' shapes: M = floor(2^28 / N) rows (16385 at N = 16383).
  --hot F    an instruction is hot if executed >= F times per item (default 0.4; without
             --items, F counts executions).
  --blocks K the K largest blocks (default 24).
With BASE_CSV, the base's summary comes first, then CSV's.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from dataclasses import dataclass

LINE_BYTES = 128  # instruction cache line
INSTRUCTION_BYTES = 16  # one SASS instruction on sm_90


@dataclass
class Instruction:
    address: int
    sass: str
    executed: int  # warp-level executions
    samples: int
    stalls: dict[str, int]

    @property
    def opcode(self) -> str:
        words = self.sass.split()
        if not words:
            return ""
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        return op.split(".")[0]


def parse(text: str) -> list[Instruction]:
    """The instructions of ncu's `--page source --csv --print-source sass` output (one kernel)."""
    rows = list(csv.reader(io.StringIO(text)))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if header_at is None:
        raise ValueError("no 'Address' header row: not ncu's source page as CSV (--page source --csv)")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    for needed in ("Source", "Instructions Executed", "# Samples"):
        if needed not in col:
            raise ValueError(f"column '{needed}' missing: profile with --section SourceCounters")
    stall_cols = {name: i for name, i in col.items() if name.startswith("stall_") and "(Not Issued)" not in name}

    def number(row: list[str], i: int) -> int:
        value = row[i].strip().replace(",", "") if i < len(row) else ""
        return int(float(value)) if value not in ("", "-") else 0

    out = []
    for row in rows[header_at + 1:]:
        if not row or not row[0].startswith("0x"):
            continue
        out.append(Instruction(int(row[0], 16), row[col["Source"]].strip(), number(row, col["Instructions Executed"]),
                               number(row, col["# Samples"]),
                               {name[len("stall_"):]: number(row, i) for name, i in stall_cols.items()}))
    if not out:
        raise ValueError("no instruction rows")
    out.sort(key=lambda ins: ins.address)
    return out


def execution_class(per_item: float) -> str:
    """Executions per item as a class: '0' (never), '<0.05' (rare), tenths below 0.95 (code of
    some items only, e.g. '0.5' every other row), else the nearest whole number."""
    if per_item == 0:
        return "0"
    if per_item < 0.05:
        return "<0.05"
    if per_item < 0.95:
        return f"{per_item:.1f}"
    return str(round(per_item))


def summary(name: str, code: list[Instruction], items: int | None, hot: float, blocks: int) -> list[str]:
    scale = float(items) if items else 1.0
    executed = sum(i.executed for i in code)
    samples = sum(i.samples for i in code)
    stalls: Counter[str] = Counter()
    for ins in code:
        stalls.update(ins.stalls)
    lines = [f"== {name}: {len(code)} instructions, {executed:,} warp instructions executed"
             + (f" ({executed / scale:,.1f} per item)" if items else "") + f", {samples:,} stall samples"]
    top = [f"{reason} {count} ({100 * count / max(samples, 1):.1f}%)" for reason, count in stalls.most_common(10) if count]
    lines.append("  stall reasons: " + ", ".join(top))
    start = code[0].address
    hot_code = [i for i in code if i.executed >= hot * scale]
    hot_lines = {(i.address - start) // LINE_BYTES for i in hot_code}
    unit = "per item" if items else "times"
    lines.append(f"  hot (executed >= {hot:g} {unit}): {len(hot_code)} instructions "
                 f"({len(hot_code) * INSTRUCTION_BYTES / 1024:.1f} KB) in {len(hot_lines)} lines of {LINE_BYTES} bytes "
                 f"({len(hot_lines) * LINE_BYTES / 1024:.1f} KB)")
    if not items:
        return lines
    # Blocks: runs of consecutive instructions of one execution class, as (class, instructions).
    runs: list[tuple[str, list[Instruction]]] = []
    for ins in code:
        cls = execution_class(ins.executed / scale)
        if runs and runs[-1][0] == cls:
            runs[-1][1].append(ins)
        else:
            runs.append((cls, [ins]))
    by_class: Counter[str] = Counter()
    for cls, run in runs:
        by_class[cls] += len(run)
    lines.append("  instructions per class (executions per item): "
                 + ", ".join(f"{c}: {n}" for c, n in sorted(by_class.items(), key=lambda kv: -kv[1])))
    executed_runs = [(cls, run) for cls, run in runs if cls != "0"]
    largest = sorted(executed_runs, key=lambda r: len(r[1]), reverse=True)[:blocks]
    largest.sort(key=lambda r: r[1][0].address)
    lines.append(f"  the {len(largest)} largest blocks that run (offset from the kernel's start):")
    lines.append(f"    {'offset':>13} {'class':>5} {'instr':>5} {'samples':>7} {'no_inst':>7}  opcodes")
    for cls, run in largest:
        ops = Counter(i.opcode for i in run).most_common(5)
        lines.append(f"    {run[0].address - start:6x}-{run[-1].address - start:6x} "
                     f"{cls:>5} {len(run):5d} {sum(i.samples for i in run):7d} "
                     f"{sum(i.stalls.get('no_inst', 0) for i in run):7d}  " + " ".join(f"{o}:{n}" for o, n in ops))
    return lines


def self_test() -> int:
    """A made-up kernel of 4 items: blocks run 8 times and once per item, an instruction of every
    other item, a rare one, and code that never runs."""
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "# Samples", "Instructions Executed",
              "stall_no_inst", "stall_barrier", "stall_no_inst (Not Issued)"]
    rows = [["Kernel Name", "k"], header]
    address = 0x1000
    def add(sass: str, executed: int, samples: int, no_inst: int, barrier: int) -> None:
        nonlocal address
        rows.append([hex(address), f"      {sass}", str(samples), str(samples), str(executed), str(no_inst),
                     str(barrier), "0"])
        address += INSTRUCTION_BYTES
    for _ in range(10):
        add("FADD R1, R2, R3", 32, 5, 1, 0)    # 8 per item: 10 instructions
    for _ in range(3):
        add("@P0 SEL R1, R2, R3, P1", 4, 2, 2, 0)  # 1 per item
    add("BAR.SYNC.DEFER_BLOCKING 0x0", 32, 10, 0, 9)  # 8 per item
    add("EXIT", 2, 0, 0, 0)  # every other item
    add("BRA 0x0", 1, 1, 1, 0)  # rare at --hot 0.4
    for _ in range(20):
        add("NOP", 0, 0, 0, 0)  # never runs: counted in its class, not listed as a block
    text = io.StringIO()
    csv.writer(text).writerows(rows)
    code = parse(text.getvalue())
    out = "\n".join(summary("test", code, 4, 0.4, 3))
    checks = [
        ("count", "36 instructions, 367 warp instructions executed (91.8 per item), 67 stall samples" in out),
        ("reasons", "no_inst 17 (25.4%), barrier 9 (13.4%)" in out),
        # 15 hot instructions (240 bytes) from 0x1000: lines 0 and 1 of 128 bytes
        ("hot", "hot (executed >= 0.4 per item): 15 instructions (0.2 KB) in 2 lines" in out),
        ("classes", "0: 20, 8: 11, 1: 3, 0.5: 1, 0.2: 1" in out),
        ("never-run code not a block", "NOP" not in out),
        ("blocks", "     0-    90     8    10      50      10  FADD:10" in out
         and "    a0-    c0     1     3       6       6  SEL:3" in out),
        ("opcode after a predicate", "SEL:3" in out),
    ]
    failed = [name for name, ok in checks if not ok]
    if failed:
        print(out)
        print("ncu_source self-test failed:", ", ".join(failed), file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="?")
    parser.add_argument("base", nargs="?")
    parser.add_argument("--items", type=int)
    parser.add_argument("--hot", type=float, default=0.4)
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.csv:
        parser.print_usage(sys.stderr)
        return 2
    if args.items is not None and args.items <= 0:
        parser.error("--items: a positive count")
    for path in ([args.base] if args.base else []) + [args.csv]:
        try:
            with open(path, newline="") as f:
                code = parse(f.read())
        except (OSError, ValueError) as e:
            print(f"ncu_source.py: {path}: {e}", file=sys.stderr)
            return 1
        print("\n".join(summary(path, code, args.items, args.hot, args.blocks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
