#!/usr/bin/env python3
"""Machine code size, registers and spills of every kernel of a translation unit, compiled
here (no GPU): nvcc -cubin for sm_90a, each kernel's SASS size and a digest of its machine
code from its .text section (read from the cubin's ELF headers), its registers and spills from
ptxas -v. With --base, the same unit of another source tree (e.g. .ab/base, made with git
archive) side by side, and the change.

Why: a change to the row kernel's loop can grow the code of kernels that do not use it, and
some kernels measured slower with more code (the cross-entropy forward: row_kernel.cuh, "Paced
order"; docs/performance_log.md, "Stage counts and release placement"). This shows it before any
GPU time is spent.

Usage, from the repository root (a unit takes ~1-3 minutes on 2 cores; both trees compile side
by side):
  tools/kernel_sizes.py kernels/cross_entropy/cross_entropy.cu [--base .ab/base]
                        [--filter REGEX] [--changed] [--all-dtypes]
  --filter   only kernels whose short name matches REGEX (e.g. 'ce_forward_op<bf16, false>')
  --changed  only kernels whose machine code differs between the trees (each kernel's .text
             section compared byte for byte; "code differs" marks them in the full listing, and
             "= base NAME" one whose code is byte for byte that of another base kernel, e.g. a
             size class moved up by one index where a class was inserted below it)
  --all-dtypes  compile the norms for every dtype (default: -DTILEKIT_DEV_BF16_ONLY=1, which
             only the norms read: kernels/README.md)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

NVCC_FLAGS = ["-cubin", "-arch=sm_90a", "-std=c++20", "--expt-relaxed-constexpr", "--extended-lambda", "-O3",
              "-Xptxas", "-v"]


def compile_unit(tree: Path, unit: str, bf16_only: bool, out: Path) -> str:
    """Compile `unit` of source tree `tree` to `out`; returns ptxas's log."""
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    cmd = [nvcc, *NVCC_FLAGS, "-I", str(tree / "include"), "-I", str(tree / "kernels"), str(tree / unit), "-o", str(out)]
    if bf16_only:
        cmd.insert(1, "-DTILEKIT_DEV_BF16_ONLY=1")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"kernel_sizes.py: nvcc failed for {tree / unit}:\n{run.stderr[-3000:]}")
    return run.stderr


def demangle(names: list[str]) -> dict[str, str]:
    run = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return dict(zip(names, run.stdout.splitlines()))


def short_name(full: str) -> str:
    """row_kernel<ns::op<args>, I, Aligned, Claimed>(...) -> 'op<args> class I aligned claimed'
    (Aligned = false: the shifted stream, for unaligned rows)."""
    full = re.sub(r"\(anonymous namespace\)::|tilekit::kernels::(norms_detail::|detail::)?", "", full)
    full = full.replace("__nv_bfloat16", "bf16").replace("__half", "fp16").replace("(norm_kind)0", "rms")
    full = full.replace("(norm_kind)1", "layer")
    m = re.match(r"void row_kernel<(.*), (\d+), (true|false), (true|false)>\(", full)
    if not m:
        return re.sub(r"^void ", "", full.split("(")[0])
    op, index, aligned, claimed = m.groups()
    path = "aligned" if aligned == "true" else "shifted"
    return f"{op} class {index} {path}{' claimed' if claimed == 'true' else ''}"


def key(mangled: str) -> str:
    """The mangled name without the hash of its unit's anonymous namespace (it differs between
    trees: _GLOBAL__N__<hash>_<n>_<file>_cu_<hash>)."""
    return re.sub(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+", "_GLOBAL__N_", mangled)


def text_sections(cubin: Path) -> dict[str, bytes]:
    """Kernel name -> the bytes of its .text.<name> section (the cubin is a 64-bit little-endian
    ELF: section headers at e_shoff, names in the section e_shstrndx)."""
    data = cubin.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for name_offset, _, _, _, offset, size, *_ in headers:
        name = data[names_at + name_offset:data.index(b"\0", names_at + name_offset)].decode()
        if name.startswith(".text."):
            sections[name[len(".text."):]] = data[offset:offset + size]
    return sections


def kernels(cubin: Path, log: str) -> dict[str, tuple[int, int, int, str, str]]:
    """key(mangled name) -> (SASS bytes, registers, spill store bytes, mangled name, digest of
    the machine code)."""
    usage = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and current:
            usage.setdefault(current, [0, 0])[1] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            usage.setdefault(current, [0, 0])[0] = int(m.group(1))
    return {key(name): (len(text), *usage.get(name, (0, 0)), name, hashlib.sha1(text).hexdigest())
            for name, text in text_sections(cubin).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("unit", help="translation unit, relative to the tree root")
    parser.add_argument("--base", type=Path, help="another source tree to compare with")
    parser.add_argument("--filter", default="", help="regex on the short kernel names")
    parser.add_argument("--changed", action="store_true", help="only kernels that differ between the trees")
    parser.add_argument("--all-dtypes", action="store_true", help="no -DTILEKIT_DEV_BF16_ONLY=1")
    args = parser.parse_args()
    trees = [Path(".")] + ([args.base] if args.base else [])
    for tree in trees:
        if not (tree / args.unit).is_file():
            sys.exit(f"kernel_sizes.py: no {args.unit} in {tree}")
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor() as pool:
        jobs = [pool.submit(compile_unit, tree, args.unit, not args.all_dtypes, Path(tmp) / f"{i}.cubin")
                for i, tree in enumerate(trees)]
        results = [kernels(Path(tmp) / f"{i}.cubin", job.result()) for i, job in enumerate(jobs)]
    ours = results[0]
    base = results[1] if args.base else {}
    mangled = {k: v[3] for k, v in (base | ours).items()}
    names = demangle(sorted({v[3] for v in (*base.values(), *ours.values())}))
    # Base kernels by machine code, so that a kernel whose code moved to another name (a size
    # class inserted into a table moves the classes above it up by one index) is named as such.
    base_by_code: dict[str, list[str]] = {}
    for v in base.values():
        base_by_code.setdefault(v[4], []).append(short_name(names[v[3]]))
    rows = sorted(((short_name(names[m]), k) for k, m in mangled.items()), key=lambda r: r[0])
    pattern = re.compile(args.filter)
    if args.base:
        print(f"{'kernel':72s} {'base':>7s} {'ours':>7s} {'change':>7s}   registers   spill stores")
    else:
        print(f"{'kernel':72s} {'bytes':>7s}   registers   spill stores")
    total = [0, 0]
    for short, k in rows:
        if not pattern.search(short):
            continue
        a, b = ours.get(k), base.get(k)
        if args.base:
            same_code = a is not None and b is not None and a[4] == b[4]
            if args.changed and same_code:
                continue
            size = lambda k: f"{k[0]:7d}" if k else "      -"
            regs = lambda k: f"{k[1]}" if k else "-"
            spills = lambda k: f"{k[2]}" if k else "-"
            change = f"{a[0] - b[0]:+7d}" if a and b else "       "
            note = "" if same_code or not (a and b) else "   code differs"
            moved = [n for n in base_by_code.get(a[4], []) if n != short] if a and not same_code else []
            if moved:
                note += f"   = base {moved[0]}"
            print(f"{short:72s} {size(b)} {size(a)} {change}   {regs(b):>3s} -> {regs(a):>3s}   {spills(b)} -> {spills(a)}"
                  + note)
            total[0] += b[0] if b else 0
            total[1] += a[0] if a else 0
        else:
            print(f"{short:72s} {a[0]:7d}   {a[1]:>9d}   {a[2]}")
            total[1] += a[0]
    print(f"{'total':72s} " + (f"{total[0]:7d} {total[1]:7d} {total[1] - total[0]:+7d}" if args.base else f"{total[1]:7d}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
