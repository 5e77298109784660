#!/usr/bin/env bash
# ncu's source view (SASS, per instruction: executions and stall samples) of one launch of a
# benchmark's kernel, for the working tree and, where .ab/base holds a tree (tools/device_ab.sh's
# usage), for that base too, built side by side; then tools/ncu_source.py's summary of both.
# For the question an A/B leaves open: why did this change cost (or gain) time?
#
# Usage, on the device machine, from the repository root (carry: [".ab"] for a base):
#   BENCH=bench_cross_entropy FILTER='with_gradient_odd/V:16383/' [ITEMS=16385] [KERNEL=regex]
#     [SKIP=3] [EXTRA_CUDA_FLAGS=...] tools/device_ncu.sh
#
#   BENCH   the benchmark binary (built for each side).
#   FILTER  --benchmark_filter: ONE benchmark, so that the launch profiled is its kernel.
#   KERNEL  ncu --kernel-name (default regex:row_kernel: the row kernels).
#   SKIP    launches skipped first (default 3: past the benchmark's warm-up).
#   ITEMS   rows the launch processed (the row benchmarks: floor(2^28 / N)), for counts per row.
# $OUT gets <side>.csv (ncu --page source --csv --print-source sass, ~2 MB), <side>.txt (ncu's
# details page: speed of light, warp state, source counters) and summary.txt. About 100 s to
# build bench_cross_entropy bf16-only (EXTRA_CUDA_FLAGS=-DTILEKIT_DEV_BF16_ONLY=1) and ~10 s per
# side to profile.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
: "${BENCH:?BENCH: the benchmark binary}" "${FILTER:?FILTER: one benchmark}"
sides=(ours)
[ -f .ab/base/CMakeLists.txt ] && sides=(base ours)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
build_sides "${sides[*]}" "$BENCH"
csvs=()
for side in "${sides[@]}"; do
  rm -f "/tmp/ncu_$side.ncu-rep"
  ncu --clock-control none --kernel-name "${KERNEL:-regex:row_kernel}" --launch-skip "${SKIP:-3}" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no -o "/tmp/ncu_$side" \
    "${side_build[$side]}/bench/$BENCH" --benchmark_filter="$FILTER" > "/tmp/ncu_$side.log" 2>&1
  [ -f "/tmp/ncu_$side.ncu-rep" ] || { echo "== ncu of side $side wrote no report"; tail -20 "/tmp/ncu_$side.log"; exit 1; }
  ncu -i "/tmp/ncu_$side.ncu-rep" --page source --csv --print-source sass > "$out/$side.csv"
  ncu -i "/tmp/ncu_$side.ncu-rep" --page details > "$out/$side.txt"
  grep -E "^  [a-z_:]|Duration|Warp Cycles Per Issued" "$out/$side.txt" | sed "s/^/$side: /"
  note "profiled $side"
  csvs=("$out/$side.csv" "${csvs[@]}")  # ours first, then the base: ncu_source.py CSV [BASE_CSV]
done
python3 tools/ncu_source.py "${csvs[@]}" ${ITEMS:+--items "$ITEMS"} | tee "$out/summary.txt"
