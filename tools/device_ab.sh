#!/usr/bin/env bash
# A same-run A/B of benchmark binaries on the device machine: the working tree against a base
# source tree, both built on the machine, then each benchmark run base / ours alternately for
# ROUNDS rounds, so that both sides see the same GPU, clocks and copy ceiling. A comparison of
# two runs on different machines (or hours apart) cannot show a few per cent: this can.
#
# Usage, from the repository root:
#   here:   rm -rf .ab/base && mkdir -p .ab/base && git archive <base-commit> | tar -x -C .ab/base
#   device: [BENCHES="bench_norms bench_cross_entropy"] [FILTER=regex] [ROUNDS=2] tools/device_ab.sh
#           (carry: [".ab/base"]; .ab/ is ignored, so it must be named)
#
#   BENCHES  benchmark targets (default bench_cross_entropy). ~35-50 s per run of a whole binary.
#   FILTER   --benchmark_filter for every run (default: all benchmarks of the binary).
#   ROUNDS   base / ours pairs per benchmark (default 2).
# JSON of every run goes to $OUT as <bench>.<base|ours>.<round>.json; at the end
# tools/bench_ab.py prints the ratio ours / base per benchmark and round.
# Time: both trees' benchmarks build side by side in ~6 minutes on the 16-core machine (their
# kernel libraries dominate), so one call holds the builds and about four binary runs.
set -u
base_src=.ab/base
out=${OUT:-/tmp/out}
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
[ -f "$base_src/CMakeLists.txt" ] || { echo "device_ab.sh: no base tree in $base_src (see the usage)" >&2; exit 2; }
read -r -a benches <<< "${BENCHES:-bench_cross_entropy}"
rounds=${ROUNDS:-2}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cmake -S . -B build "${device_cmake_flags[@]}" && cmake --build build -j"$(nproc)" --target "${benches[@]}") > /tmp/ab_ours.log 2>&1 &
ours=$!
(cmake -S "$base_src" -B build-ab-base "${device_cmake_flags[@]}" && cmake --build build-ab-base -j"$(nproc)" --target "${benches[@]}") \
  > /tmp/ab_base.log 2>&1 &
base=$!
failed=0
wait "$ours" || { echo "== build of the working tree failed"; tail -30 /tmp/ab_ours.log; failed=1; }
wait "$base" || { echo "== build of the base tree failed"; tail -30 /tmp/ab_base.log; failed=1; }
[ "$failed" = 0 ] || exit 1
note "built"
for bench in "${benches[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    for side in base ours; do
      dir=build; [ "$side" = base ] && dir=build-ab-base
      "$dir/bench/$bench" ${FILTER:+--benchmark_filter=$FILTER} --benchmark_out="$out/$bench.$side.$r.json" \
        --benchmark_out_format=json > "/tmp/$bench.$side.$r.txt" 2>&1 || { echo "$bench $side failed"; tail "/tmp/$bench.$side.$r.txt"; exit 1; }
      note "$bench $side round $r"
    done
  done
done
python3 tools/bench_ab.py "$out"
