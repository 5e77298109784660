#!/usr/bin/env bash
# A same-run A/B of benchmark binaries on the device machine: the working tree against a base
# source tree, both built on the machine, then each benchmark run base / ours alternately for
# ROUNDS rounds, so that both sides see the same GPU, clocks and copy ceiling. A comparison of
# two runs on different machines (or hours apart) cannot show a few per cent: this can.
#
# Usage, from the repository root:
#   here:   rm -rf .ab/base && mkdir -p .ab/base && git archive <base-commit> | tar -x -C .ab/base
#           (optional further sides: any .ab/<name> tree the same way, e.g. .ab/head, run as side
#           <name> between base and ours: an A/B/C that measures two changes in one call)
#   device: [BENCHES="bench_norms bench_cross_entropy"] [FILTER=regex] [ROUNDS=2] tools/device_ab.sh
#           (carry: [".ab"]; .ab/ is ignored, so it must be named)
#
#   BENCHES  benchmark targets (default bench_cross_entropy). ~35-50 s per run of a whole binary.
#   FILTER   --benchmark_filter for every run (default: all benchmarks of the binary).
#   ROUNDS   rounds of every side per benchmark (default 2).
#   OURS     0: leave the working tree out (no side "ours"), e.g. when it is base's commit and the
#            sides are patches (tools/ab_patches.sh): one build and its runs fewer (default 1).
# JSON of every run goes to $OUT as <bench>.<side>.<round>.json; after each binary's rounds
# tools/bench_ab.py prints the ratio of every side to base per benchmark and round (and appends
# it to $OUT/ab.txt).
# Time: the trees' benchmarks build side by side in ~6 minutes on the 16-core machine (their
# kernel libraries dominate; ~1 minute for bench_norms built with -DTILEKIT_DEV_BF16_ONLY=1),
# so one call holds the builds and about four binary runs per side.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
[ -f .ab/base/CMakeLists.txt ] || { echo "device_ab.sh: no base tree in .ab/base (see the usage)" >&2; exit 2; }
read -r -a benches <<< "${BENCHES:-bench_cross_entropy}"
rounds=${ROUNDS:-2}
# Sides in run order: base, the other .ab trees, ours (the working tree).
sides=(base)
for tree in .ab/*/; do
  name=$(basename "$tree")
  [ "$name" != base ] && [ -f "$tree/CMakeLists.txt" ] && sides+=("$name")
done
[ "${OURS:-1}" = 0 ] || sides+=(ours)
[ ${#sides[@]} -ge 2 ] || { echo "device_ab.sh: only base to run (OURS=0 and no other .ab tree)" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
build_sides "${sides[*]}" "${benches[@]}"
for bench in "${benches[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    for side in "${sides[@]}"; do
      "${side_build[$side]}/bench/$bench" ${FILTER:+--benchmark_filter=$FILTER} --benchmark_out="$out/$bench.$side.$r.json" \
        --benchmark_out_format=json > "/tmp/$bench.$side.$r.txt" 2>&1 || { echo "$bench $side failed"; tail "/tmp/$bench.$side.$r.txt"; exit 1; }
      note "$bench $side round $r"
    done
  done
  # Now, so that a run cut short still shows what it measured; also into $OUT/ab.txt, which comes
  # back even when the call's printed output does not (a command past its time limit).
  python3 tools/bench_ab.py "$out" "$bench" | tee -a "$out/ab.txt"
done
