#!/usr/bin/env bash
# The element checks' margins from one GPU call: build the kernel suites' test binaries (every
# dtype), run each in shards side by side with TILEKIT_TEST_REPORT=1 (gpu_test.cuh:
# report_close prints each TILEKIT_EXPECT_CLOSE_SCALED / _EACH's max_scaled and its bound), and
# print the failures and, per test and check line, the largest fraction of its bound used. On
# the device machine a fresh build of the three suites takes ~270-380 s, the run ~70 s.
#
# Usage, from the repository root:
#   [TARGETS="test_softmax ..."] [SHARDS="test_softmax:2 ..."] tools/device_margins.sh
#
#   TARGETS  CMake targets to build (default the three kernel suites and test_compare_each).
#   SHARDS   binary:shards to run (default test_norms:3 test_softmax:2 test_cross_entropy:2).
# Logs: $OUT/build.log and $OUT/<binary>.<shard>.log: at most 8 files come back from a call, so
# at most 7 shards in all. Exits 1 if a shard failed, crashed or ran out of time.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
deadline=${DEADLINE:-560}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
read -r -a targets <<< "${TARGETS:-test_norms test_softmax test_cross_entropy test_compare_each}"
device_build "$out/build.log" "${targets[@]}"
note "built"
pids=()
for spec in ${SHARDS:-test_norms:3 test_softmax:2 test_cross_entropy:2}; do
  name=${spec%%:*} shards=${spec##*:}
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i TILEKIT_REQUIRE_GPU=1 TILEKIT_TEST_REPORT=1 \
      timeout "$(left)" "build/tests/$name" > "$out/$name.$i.log" 2>&1 &
    pids+=($!)
  done
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
note "tests done$([ $failed = 1 ] && echo ": a shard failed, crashed or timed out")"
cat "$out"/test_*.log | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | sort | uniq -c
# "[close] Suite.Test file:line max_scaled M tol T (...)": the largest M / T per test and line
# (a NaN or inf M first, as 1e300).
cat "$out"/test_*.log | grep "^\[close\]" |
  awk '{r = ($5 ~ /nan|inf/) ? 1e300 : ($7 > 0 ? $5 / $7 : 0); printf "%s %s %.3g %s\n", $2, $3, r, $5}' |
  sort -k3 -g -r | awk '!seen[$1" "$2]++' | head -60
exit $failed
