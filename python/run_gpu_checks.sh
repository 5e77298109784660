#!/usr/bin/env bash
# Build the tilekit PyTorch extension in place and run its tests on a GPU machine (H100/H200).
#
# Usage, from the repository root (or anywhere: the script finds the root itself):
#   [TILEKIT_KERNELS_LIB=<build>/kernels/libtilekit_kernels.a] python/run_gpu_checks.sh [--bench] [--full-bench]
#
#   TILEKIT_KERNELS_LIB  link the CMake-built kernel library (fast); unset: nvcc compiles kernels/*/*.cu
#   --bench              also run bench/compare_norms.py --quick (JSON: $OUT/compare_norms_quick.json,
#                        or python/ when $OUT is unset)
#   --full-bench         also run bench/compare_norms.py on every size ($OUT/compare_norms.json)
#
# The build takes ~1-2 minutes with TILEKIT_KERNELS_LIB, the tests ~2-3 minutes (four small
# torch.compile runs); the quick benchmark compiles 24 torch.compile baselines (several minutes),
# so under a per-command time limit run it as its own command.
#
# Needs python3 with torch (CUDA build), pytest, setuptools and ninja; no network. Exits non-zero
# on the first failing step.
set -euo pipefail

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

bench=""
for arg in "$@"; do
  case "$arg" in
    --bench) bench="quick" ;;
    --full-bench) bench="full" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_gpu_checks.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${TILEKIT_KERNELS_LIB:-}" ]]; then
  # Relative to where the script was started from, before changing directory.
  TILEKIT_KERNELS_LIB="$(cd "$(dirname "$TILEKIT_KERNELS_LIB")" && pwd)/$(basename "$TILEKIT_KERNELS_LIB")"
  export TILEKIT_KERNELS_LIB
  [[ -f "$TILEKIT_KERNELS_LIB" ]] || { echo "TILEKIT_KERNELS_LIB=$TILEKIT_KERNELS_LIB does not exist" >&2; exit 1; }
  echo "== linking the prebuilt kernel library $TILEKIT_KERNELS_LIB"
else
  echo "== TILEKIT_KERNELS_LIB unset: compiling kernels/*/*.cu into the extension"
fi
cd "$repo_root"

echo "== environment"
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'
nvcc --version | tail -n 1

echo "== build (python/setup.py build_ext --inplace)"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"       # ninja parallelism of torch.utils.cpp_extension
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0a}"
(cd python && python3 setup.py build_ext --inplace)

echo "== import"
export PYTHONPATH="$repo_root/python${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import tilekit, torch; assert tilekit.is_available(), tilekit.load_error(); print("torch.ops.tilekit:", sorted(n for n in dir(torch.ops.tilekit) if not n.startswith("_")))'

echo "== pytest python/tests"
export TILEKIT_REQUIRE_EXTENSION=1            # a missing extension or GPU fails instead of skipping
python3 -m pytest -q -ra python/tests

results_dir="${OUT:-$repo_root/python}"
case "$bench" in
  quick)
    echo "== bench/compare_norms.py --quick"
    python3 bench/compare_norms.py --quick --json "$results_dir/compare_norms_quick.json" ;;
  full)
    echo "== bench/compare_norms.py"
    python3 bench/compare_norms.py --json "$results_dir/compare_norms.json" ;;
esac
echo "== all checks passed"
