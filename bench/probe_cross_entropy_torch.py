#!/usr/bin/env python3
"""Where the CE forward loses bandwidth through PyTorch (issue 4; docs/performance.md).

compare_norms.py timed tilekit.cross_entropy(x, labels) (mean reduction, no label smoothing)
at 0.62-0.86x of copy on 2026-12-02, while bench_cross_entropy timed the kernel alone (label
smoothing 0.1, logits uniform in [-4, 4]) at 0.80-0.96x; this script found the mean's six torch
kernels (17-28 us per call), which cross_entropy_reduce replaced on 2026-12-03 (one launch, 'mean'
now 1-6 us above 'none': docs/performance_log.md, "CE forward through PyTorch"). It takes the
difference between the operator and the public call apart, at the same
shapes (bf16, M * N = 2^28, labels int64), each timed as compare_norms does (CUDA events around
every call, median of --iters after --warmup):

  op eps=0.1     the raw operator torch.ops.tilekit.cross_entropy_fwd, label smoothing 0.1
  op eps=0       the same, label smoothing 0 (what cross_entropy's default passes)
  none           tilekit.cross_entropy(..., reduction='none'): the operator + autograd wrapper
  mean           tilekit.cross_entropy(...) as compare_norms calls it
  mean graph     the same call captured once in a CUDA graph and replayed (no CPU launch cost)

plus, for 'mean', the device time of every kernel of one call (torch.profiler, median of
--iters calls), and the CPU time per call (perf_counter over --iters calls, not synchronized:
a call whose CPU time is above its GPU time leaves the GPU waiting, and the event timing then
measures the CPU). Bandwidth is bytes of logits read / time, as the table's x-copy ratios.

Usage (from the repository root, with the extension built, see python/README.md):
  python3 bench/probe_cross_entropy_torch.py [--sizes 1024,32768] [--iters 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import tilekit  # noqa: E402
from compare_norms import SIZES, TOTAL_ELEMENTS, copy_bandwidth_gbps, time_ms  # noqa: E402


def kernel_times_us(fn, iters: int) -> dict[str, float]:
    """Median device time per call of each kernel that fn() launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel.setdefault(event.name, []).append(event.device_time)
    return {name: statistics.median(times) * len(times) / iters for name, times in per_kernel.items()}


def cpu_us_per_call(fn, iters: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / iters * 1e6


def graphed(fn):
    """fn captured once in a CUDA graph (after a warm-up on a side stream); returns the replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help="comma-separated row widths N (default the issue's grid)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("probe_cross_entropy_torch.py needs a CUDA device")
    if not tilekit.is_available():
        sys.exit(f"tilekit._C is not available: {tilekit.load_error()}")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    op = torch.ops.tilekit.cross_entropy_fwd

    copy_gbps = copy_bandwidth_gbps(args.warmup, args.iters)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, M*N = 2^28, "
          f"copy {copy_gbps:.0f} GB/s; cells: us per call (logits bytes / time, x copy)")
    variants = ["op eps=0.1", "op eps=0", "none", "mean", "mean graph"]
    print(f"{'N':>7}" + "".join(f"{v:>19}" for v in variants) + f"{'cpu us':>8}")
    results = []
    for n in sizes:
        m = TOTAL_ELEMENTS // n
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        labels = torch.randint(0, n, (m,), device="cuda")
        calls = {
            "op eps=0.1": lambda: op(x, labels, -100, 0.1, 0.0, False, None, 1.0),
            "op eps=0": lambda: op(x, labels, -100, 0.0, 0.0, False, None, 1.0),
            "none": lambda: tilekit.cross_entropy(x, labels, reduction="none"),
            "mean": lambda: tilekit.cross_entropy(x, labels),
        }
        calls["mean graph"] = graphed(calls["mean"])
        ms = {name: time_ms(fn, args.warmup, args.iters) for name, fn in calls.items()}
        cpu = cpu_us_per_call(calls["mean"], args.iters)
        kernels = kernel_times_us(calls["mean"], args.iters)
        logits_bytes = m * n * 2
        cells = ""
        for name in variants:
            ratio = logits_bytes / (ms[name] * 1e-3) / 1e9 / copy_gbps
            cells += f"{ms[name] * 1e3:10.1f} ({ratio:5.3f})"
        print(f"{n:>7}{cells}{cpu:8.1f}")
        for name, us in sorted(kernels.items(), key=lambda kv: -kv[1]):
            print(f"{'':>9}mean kernel {us:8.1f} us  {name[:60]}")  # names cut for print only
        results.append({"N": n, "M": m, "ms": ms, "cpu_us_per_mean_call": cpu, "mean_kernels_us": kernels})
        del x, labels, calls
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbps": copy_gbps, "results": results}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
