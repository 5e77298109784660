#!/usr/bin/env bash
# One GPU check of the working tree, meant for a single call of the device machine (one H200,
# 16 cores, a per-call limit of 600 s): build on the machine, run the benchmarks on a quiet GPU,
# then ctest, the sanitizer runs and the PyTorch checks side by side, all before DEADLINE
# seconds. Logs go to $OUT (at most 8 files come back): build.log, <bench>.json, table.md
# (tools/perf_table.py: the performance table and the cells under target), ctest.log, san.log,
# python.log.
#
# Usage, from the repository root:
#   [TARGETS="..."] [BENCHES="bench_norms ..."] [FILTER=regex] [SAN="tool:test[:gtest_filter] ..."] \
#   [CTEST_ARGS="-R ..."] [PYTEST=0] [DEADLINE=570] tools/device_check.sh
#
#   TARGETS   CMake targets to build (default all). A fresh machine builds everything but the
#             examples in ~230 s (tools/device_env.sh: the configuration).
#   CTEST_ARGS extra ctest arguments; with a TARGETS subset, a -R filter to the tests built
#             (the others would be reported as not run).
#   BENCHES   benchmark binaries to run, in order (default the three row-kernel ones, ~50 s
#             each; empty: none).
#   FILTER    --benchmark_filter for every benchmark binary (default: all of its benchmarks).
#   SAN       compute-sanitizer runs on test binaries, e.g.
#             "memcheck:test_norms:Norms.LayerForwardBf16 racecheck:test_reduce". They run with
#             TILEKIT_TEST_SMALL=1 (tests/common/gpu_test.cuh: the tests that honour it take
#             smaller problems; test_row_order_checkable does). racecheck of the whole
#             test_row_order_checkable still takes minutes: filter it.
#   PYTEST    1 (default): python/run_gpu_checks.sh against the kernel library just built.
#
# Why a build here: the built binaries (~270 MB, fatbins already compressed) do not fit the
# 64 MiB that a call can carry, and a machine idle for 30 s is given back with its build.
set -u
build=$PWD/build
out=${OUT:-/tmp/out}
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device_env.sh"
export PYTHONUNBUFFERED=1
deadline=${DEADLINE:-570}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
read -r -a targets <<< "${TARGETS:-all}"
device_build "$out/build.log" "${targets[@]}"
note "built"

for bench in ${BENCHES-bench_norms bench_softmax bench_cross_entropy}; do
  note "== $bench"
  "$build/bench/$bench" ${FILTER:+--benchmark_filter=$FILTER} --benchmark_out="$out/$bench.json" --benchmark_out_format=json > "/tmp/$bench.txt" 2>&1
  echo "rc=$?"
  grep -m2 -i "ceilings\|error" "/tmp/$bench.txt"
done
# The table of docs/performance.md and the cells under target, from the JSON just written.
[ -n "${BENCHES-x}" ] && python3 tools/perf_table.py "$out" | tee "$out/table.md"

# ctest: every test, the kernel suites once more in the claimed order (*.claimed) and the
# checkable stage release (*.checkable), as tests/CMakeLists.txt registers them.
read -r -a ctest_args <<< "${CTEST_ARGS:-}"
(TILEKIT_REQUIRE_GPU=1 timeout "$(left)" ctest --test-dir "$build" -j6 --timeout 300 --output-on-failure --no-tests=error "${ctest_args[@]}"
 echo "ctest rc=$?") > "$out/ctest.log" 2>&1 &
tests=$!
(
  for spec in ${SAN:-}; do
    IFS=: read -r tool name filter <<< "$spec"
    start=$(date +%s)
    TILEKIT_REQUIRE_GPU=1 TILEKIT_TEST_SMALL=1 timeout "$(left)" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$build/tests/$name" --gtest_brief=1 ${filter:+--gtest_filter=$filter} > /tmp/sanitizer.log 2>&1
    rc=$?
    echo "$tool $name $filter rc=$rc $(($(date +%s) - start))s:" \
      "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' /tmp/sanitizer.log | tr '\n' ' ')"
    [ $rc = 0 ] || tail -20 /tmp/sanitizer.log
  done
) > "$out/san.log" 2>&1 &
sanitizers=$!
pytest=${PYTEST:-1}
if [ "$pytest" = 1 ]; then  # extension build against the kernel library, import, pytest
  TILEKIT_KERNELS_LIB=$build/kernels/libtilekit_kernels.a MAX_JOBS=6 \
    timeout "$(left)" bash python/run_gpu_checks.sh > "$out/python.log" 2>&1 &
  python=$!
fi
wait "$tests"; note "ctest done"
wait "$sanitizers"; note "sanitizers done"
if [ "$pytest" = 1 ]; then wait "$python"; note "pytest rc=$?"; fi
grep -E "tests passed|tests failed|Failed|\*\*\*|ctest rc" "$out/ctest.log" | tail -40
cat "$out/san.log"
[ "$pytest" = 1 ] && tail -8 "$out/python.log"
exit 0
