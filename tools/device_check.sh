#!/usr/bin/env bash
# One GPU check of the working tree, meant for a single call of the device machine (one H200,
# 16 cores, a per-call limit of 600 s): build on the machine, run the benchmarks on a quiet GPU
# while the PyTorch extension compiles on the CPU, then the GPU tests, the sanitizer runs and
# pytest side by side, all before DEADLINE seconds. Logs go to $OUT (at most 8 files come back):
# build.log, <bench>.json, gtests.log, san.log, python.log.
#
# Usage, from the repository root:
#   [TARGETS="..."] [BENCHES="bench_norms ..."] [SAN="tool:test[:gtest_filter] ..."] \
#   [PYTEST=0] [DEADLINE=570] tools/device_check.sh
#
#   TARGETS   CMake targets to build (default all). A fresh machine builds everything but the
#             examples in ~230 s with --split-compile=0 (2026-12-02); without it, ~520 s.
#   BENCHES   benchmark binaries to run, in order (default the three row-kernel ones, ~50 s
#             each; empty: none).
#   SAN       compute-sanitizer runs on test binaries, e.g.
#             "memcheck:test_norms:Norms.LayerForwardBf16 racecheck:test_reduce". racecheck of
#             the whole test_row_order_checkable takes more than 4 minutes: filter it.
#   PYTEST    1 (default): build python/ against the kernel library and run pytest python/tests.
#
# Why a build here: the built binaries (~270 MB, fatbins already compressed) do not fit the
# 64 MiB that a call can carry, and a machine idle for 30 s is given back with its build.
set -u
root=$PWD
build=$root/build
out=${OUT:-/tmp/out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
deadline=${DEADLINE:-570}
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
left() { local l=$((deadline - $(elapsed))); echo $((l > 1 ? l : 1)); }
note() { echo "[$(elapsed)s] $*"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
read -r -a targets <<< "${TARGETS:-all}"
if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
         -DTILEKIT_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_FLAGS=--split-compile=0 > "$out/build.log" 2>&1 &&
       cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >> "$out/build.log" 2>&1; }; then
  note "build failed"; grep -B2 -A10 "error" "$out/build.log" | head -60; exit 1
fi
note "built"

pytest=${PYTEST:-1}
if [ "$pytest" = 1 ]; then
  (cd python && TILEKIT_KERNELS_LIB=$build/kernels/libtilekit_kernels.a MAX_JOBS=6 TORCH_CUDA_ARCH_LIST=9.0a \
     python3 setup.py build_ext --inplace) > "$out/python.log" 2>&1 &
  pybuild=$!
fi
for bench in ${BENCHES-bench_norms bench_softmax bench_cross_entropy}; do
  note "== $bench"
  "$build/bench/$bench" --benchmark_out="$out/$bench.json" --benchmark_out_format=json > "/tmp/$bench.txt" 2>&1
  echo "rc=$?"
  grep -m2 -i "ceilings\|error" "/tmp/$bench.txt"
done
if [ "$pytest" = 1 ]; then wait "$pybuild"; note "python build rc=$?"; fi

(  # every test binary, then the kernel suites in the claimed order (as ctest's *.claimed tests)
  run_test() {  # name log [env...]
    local name=$1 log=$2; shift 2
    local start rc
    start=$(date +%s)
    env TILEKIT_REQUIRE_GPU=1 "$@" timeout "$(left)" "$build/tests/$name" --gtest_brief=1 > "$log" 2>&1
    rc=$?
    echo "$name${*:+ ($*)} rc=$rc $(($(date +%s) - start))s $(grep -E '^\[  (PASSED|FAILED)' "$log" | tr '\n' ' ')"
    [ $rc = 0 ] || tail -30 "$log"
  }
  for t in "$build"/tests/test_*; do
    [ -f "$t" ] && [ -x "$t" ] && run_test "$(basename "$t")" "/tmp/test_$(basename "$t").log"
  done
  for name in test_norms test_softmax test_cross_entropy; do
    run_test "$name" "/tmp/claimed_$name.log" TILEKIT_ROW_ORDER=claimed
  done
) > "$out/gtests.log" 2>&1 &
tests=$!
(
  for spec in ${SAN:-}; do
    IFS=: read -r tool name filter <<< "$spec"
    start=$(date +%s)
    TILEKIT_REQUIRE_GPU=1 timeout "$(left)" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$build/tests/$name" --gtest_brief=1 ${filter:+--gtest_filter=$filter} > /tmp/sanitizer.log 2>&1
    rc=$?
    echo "$tool $name $filter rc=$rc $(($(date +%s) - start))s:" \
      "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' /tmp/sanitizer.log | tr '\n' ' ')"
    [ $rc = 0 ] || tail -20 /tmp/sanitizer.log
  done
) > "$out/san.log" 2>&1 &
sanitizers=$!
if [ "$pytest" = 1 ]; then
  (
    export PYTHONPATH=$root/python TILEKIT_REQUIRE_EXTENSION=1
    python3 -c 'import tilekit; assert tilekit.is_available(), tilekit.load_error()' &&
      timeout "$(left)" python3 -m pytest -q -ra python/tests
  ) >> "$out/python.log" 2>&1 &
  python=$!
fi
wait "$tests"; note "tests done"
wait "$sanitizers"; note "sanitizers done"
if [ "$pytest" = 1 ]; then wait "$python"; note "pytest rc=$?"; fi
cat "$out/gtests.log" "$out/san.log"
[ "$pytest" = 1 ] && tail -8 "$out/python.log"
exit 0
