#!/usr/bin/env python3
"""tilekit's memory-bound kernels against PyTorch eager and torch.compile, in one run (issue 4).

For every operation and row width N (M = 2^28 / N rows, bfloat16) this script
  1. checks our outputs (and gradients) against PyTorch eager and fails loudly on a mismatch,
  2. times ours, eager and torch.compile (compiled once per (operation, N), dynamic=False) with
     CUDA events: the median of --iters runs after --warmup runs,
  3. prints GB/s of MINIMAL traffic (each input read once, each output written once; small
     per-row / per-column vectors included, autograd's saved statistics not) and our ratio to
     eager, to torch.compile and to the device-to-device copy bandwidth measured in the same
     run (dst.copy_(src) of 2 GiB, bytes read + written).

Backward passes are timed the same way for all three: torch.autograd.grad(out, inputs, dout,
retain_graph=True) on a graph built once, so each measures exactly the backward kernels (ours:
the tilekit backward operator; torch.compile: its compiled backward graph).

Usage (from the repository root, with the extension built, see python/README.md):
  python3 bench/compare_norms.py [--quick] [--json out.json] [--ops rms_norm_fwd,softmax_fwd]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilekit  # noqa: E402

TOTAL_ELEMENTS = 1 << 28  # M * N of every problem (ANCHORS.md)
SIZES = [1 << 10, 1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18]  # the grid, 1K..256K
QUICK_SIZES = [1 << 10, 1 << 14, 1 << 18]
DTYPE = torch.bfloat16
ELEMENT_BYTES = 2
LABEL_BYTES = 8  # int64 class index per row
COPY_BYTES = 2 << 30  # the copy ceiling's buffer
EPS = 1e-6
# Largest normwise relative difference accepted between ours and eager: both round their
# bf16 outputs (2^-8 relative at worst), and eager may compute intermediates in bf16.
MAX_RELATIVE_DIFFERENCE = 3e-2


def time_ms(fn: Callable[[], object], warmup: int, iters: int) -> float:
    """Median GPU time of fn() in milliseconds (CUDA events around each call)."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))


def copy_bandwidth_gbps(warmup: int, iters: int) -> float:
    src = torch.empty(COPY_BYTES // ELEMENT_BYTES, dtype=DTYPE, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup, iters)
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def as_tensors(out) -> list[torch.Tensor]:
    return [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if t is not None]


def check(op: str, n: int, ours, reference) -> None:
    """Normwise relative difference of every output; exits the run on a mismatch."""
    for i, (a, b) in enumerate(zip(as_tensors(ours), as_tensors(reference))):
        a, b = a.detach().float(), b.detach().float()
        if a.shape != b.shape:
            sys.exit(f"MISMATCH {op} N={n} output {i}: shape {tuple(a.shape)} vs torch {tuple(b.shape)}")
        if not bool(torch.isfinite(a).all()):
            sys.exit(f"MISMATCH {op} N={n} output {i}: non-finite values")
        difference = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30))
        if difference > MAX_RELATIVE_DIFFERENCE:
            sys.exit(f"MISMATCH {op} N={n} output {i}: normwise relative difference {difference:.3g} "
                     f"> {MAX_RELATIVE_DIFFERENCE}")


@dataclass
class Case:
    """One operation at one N: the three implementations as argument-free callables."""

    bytes: int
    ours: Callable[[], object]
    eager: Callable[[], object]
    compiled: Callable[[], object] | None


def backward_of(forward: Callable[..., object], inputs: tuple, dout: torch.Tensor) -> Callable[[], object]:
    """A callable running only the backward of forward(*inputs) (graph built once, retained)."""
    leaves = tuple(t.detach().requires_grad_(True) for t in inputs)
    out = forward(*leaves)
    return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)


def make_case(op: str, n: int, compile_fn) -> Case:
    m = TOTAL_ELEMENTS // n
    matrix_bytes = m * n * ELEMENT_BYTES
    vector_bytes = n * ELEMENT_BYTES
    x = torch.randn(m, n, device="cuda", dtype=DTYPE)
    w = (1 + 0.1 * torch.randn(n, device="cuda")).to(DTYPE)
    b = (0.1 * torch.randn(n, device="cuda")).to(DTYPE)

    def rms_ours(x, w):
        return tilekit.rms_norm(x, (n,), w, EPS)

    def rms_torch(x, w):
        return F.rms_norm(x, (n,), w, EPS)

    def ln_ours(x, w, b):
        return tilekit.layer_norm(x, (n,), w, b, EPS)

    def ln_torch(x, w, b):
        return F.layer_norm(x, (n,), w, b, EPS)

    def softmax_torch(x):
        return torch.softmax(x, -1)

    if op in ("rms_norm_fwd", "layer_norm_fwd", "softmax_fwd"):
        ours, reference, args, extra = {
            "rms_norm_fwd": (rms_ours, rms_torch, (x, w), vector_bytes),
            "layer_norm_fwd": (ln_ours, ln_torch, (x, w, b), 2 * vector_bytes),
            "softmax_fwd": (tilekit.softmax, softmax_torch, (x,), 0),
        }[op]
        compiled = compile_fn(reference)
        return Case(2 * matrix_bytes + extra, lambda: ours(*args), lambda: reference(*args),
                    (lambda: compiled(*args)) if compiled else None)

    if op in ("rms_norm_bwd", "layer_norm_bwd", "softmax_bwd"):
        dy = torch.randn(m, n, device="cuda", dtype=DTYPE)
        ours, reference, args, extra = {
            # read x, dy, w; write dx, dw (and db)
            "rms_norm_bwd": (rms_ours, rms_torch, (x, w), 2 * vector_bytes),
            "layer_norm_bwd": (ln_ours, ln_torch, (x, w, b), 3 * vector_bytes),
            # read y, dy; write dx
            "softmax_bwd": (tilekit.softmax, softmax_torch, (x,), 0),
        }[op]
        compiled = compile_fn(reference)
        return Case(3 * matrix_bytes + extra, backward_of(ours, args, dy), backward_of(reference, args, dy),
                    backward_of(compiled, args, dy) if compiled else None)

    labels = torch.randint(0, n, (m,), device="cuda")
    label_bytes = m * LABEL_BYTES

    def ce_torch(x, labels):
        return F.cross_entropy(x, labels)

    compiled = compile_fn(ce_torch)
    if op == "cross_entropy_fwd":  # read logits and labels; the mean loss is one scalar
        return Case(matrix_bytes + label_bytes, lambda: tilekit.cross_entropy(x, labels),
                    lambda: ce_torch(x, labels), (lambda: compiled(x, labels)) if compiled else None)

    # cross_entropy_fwd_bwd: (loss, dlogits); read logits and labels, write dlogits.
    leaf = x.detach().requires_grad_(True)

    def fused(fn):
        def run():
            loss = fn(leaf, labels)
            return loss.detach(), torch.autograd.grad(loss, leaf)[0]

        return run

    return Case(2 * matrix_bytes + label_bytes, lambda: tilekit.cross_entropy_forward_backward(x, labels),
                fused(ce_torch), fused(compiled) if compiled else None)


OPS = ["rms_norm_fwd", "rms_norm_bwd", "layer_norm_fwd", "layer_norm_bwd", "softmax_fwd", "softmax_bwd",
       "cross_entropy_fwd", "cross_entropy_fwd_bwd"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only N in {QUICK_SIZES}")
    parser.add_argument("--sizes", help="comma-separated row widths N (overrides --quick)")
    parser.add_argument("--ops", help=f"comma-separated subset of {','.join(OPS)}")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    parser.add_argument("--compile-mode", default="default",
                        choices=["default", "max-autotune-no-cudagraphs"], help="torch.compile mode")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        sys.exit("compare_norms.py needs a CUDA device")
    if not tilekit.is_available():
        sys.exit(f"tilekit._C is not available: {tilekit.load_error()}")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    ops = args.ops.split(",") if args.ops else OPS
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        sys.exit(f"unknown ops {unknown}; choose from {OPS}")
    # Every (op, N) is compiled once with static shapes after a reset, so recompilation limits
    # (which would silently fall back to eager) are never reached; raise them anyway.
    for limit in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))

    def compile_fn(fn):
        if args.no_compile:
            return None
        torch._dynamo.reset()
        mode = None if args.compile_mode == "default" else args.compile_mode
        return torch.compile(fn, dynamic=False, mode=mode)

    copy_gbps = copy_bandwidth_gbps(args.warmup, args.iters)
    device = torch.cuda.get_device_name()
    print(f"# {device}, torch {torch.__version__}, {DTYPE}, M*N = 2^28")
    print(f"# device-to-device copy (2 GiB, read + write): {copy_gbps:.0f} GB/s")
    header = (f"{'op':<22}{'N':>8}{'ours GB/s':>11}{'eager':>9}{'compile':>9}"
              f"{'/eager':>8}{'/compile':>10}{'/copy':>7}")
    print(header)
    print("-" * len(header))
    results = []
    for op in ops:
        for n in sizes:
            case = make_case(op, n, compile_fn)
            ours_out, eager_out = case.ours(), case.eager()
            check(op, n, ours_out, eager_out)
            if case.compiled is not None:
                check(op + " (torch.compile vs eager)", n, case.compiled(), eager_out)
            del ours_out, eager_out
            timings = {"ours": time_ms(case.ours, args.warmup, args.iters),
                       "eager": time_ms(case.eager, args.warmup, args.iters)}
            if case.compiled is not None:
                timings["compile"] = time_ms(case.compiled, args.warmup, args.iters)
            gbps = {k: case.bytes / (ms * 1e-3) / 1e9 for k, ms in timings.items()}
            row = {"op": op, "N": n, "M": TOTAL_ELEMENTS // n, "bytes": case.bytes,
                   **{f"{k}_ms": v for k, v in timings.items()}, **{f"{k}_gbps": v for k, v in gbps.items()},
                   "ours_over_eager": gbps["ours"] / gbps["eager"], "ours_over_copy": gbps["ours"] / copy_gbps}
            if "compile" in gbps:
                row["ours_over_compile"] = gbps["ours"] / gbps["compile"]
            results.append(row)
            compile_gbps = f"{gbps['compile']:9.0f}" if "compile" in gbps else f"{'-':>9}"
            compile_ratio = f"{row['ours_over_compile']:10.2f}" if "compile" in gbps else f"{'-':>10}"
            print(f"{op:<22}{n:>8}{gbps['ours']:11.0f}{gbps['eager']:9.0f}{compile_gbps}"
                  f"{row['ours_over_eager']:8.2f}{compile_ratio}{row['ours_over_copy']:7.2f}", flush=True)
            del case
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "dtype": str(DTYPE),
                       "total_elements": TOTAL_ELEMENTS, "copy_gbps": copy_gbps, "results": results}, f, indent=2)
        print(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
