#!/usr/bin/env bash
# Runs on the GPU machine (device tool) over a copy of this tree with a
# pre-built build directory carried along. Usage: tools/device_run.sh <build-dir> [steps...]
# steps: tests examples sanitize bench
set -uo pipefail
build=${1:-build-dev}; shift || true
steps=${*:-tests examples}
root=$PWD
# A carried build may come as carry/build.tar.xz (object files stripped) to stay under the
# transfer limit; unpack it where the build directory would be.
if [ ! -d "$build" ] && [ -f carry/build.tar.xz ]; then mkdir -p "$build" && tar -C "$build" -xJf carry/build.tar.xz; fi
# The build directory holds absolute paths of the machine it was built on (/work/main).
if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$root/$build/carried-libs:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for step in $steps; do
  case $step in
    tests)
      echo "== ctest (TILEKIT_REQUIRE_GPU=1)"
      (cd /work/main/$build && TILEKIT_REQUIRE_GPU=1 ctest -j6 --timeout 300 --output-on-failure > "$out/ctest.log" 2>&1)
      echo "ctest rc=$?"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -40 ;;
    examples)
      for ex in /work/main/$build/examples/example_*; do echo "== $ex"; "$ex" 2>&1 | tail -15; echo "rc=$?"; done ;;
    sanitize)
      # SANITIZE="tool:path/relative/to/build[:args] ..." e.g. "memcheck:tests/test_tma racecheck:examples/example_02_gemm:--quick"
      for t in ${SANITIZE:-}; do
        IFS=: read -r tool bin args <<< "$t"
        name=$(basename "$bin")
        echo "== compute-sanitizer --tool $tool $bin $args"
        timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 9 /work/main/$build/$bin $args > "$out/san_${tool}_$name.log" 2>&1
        echo "rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|PASS|FAIL" "$out/san_${tool}_$name.log" | tail -3
      done ;;
    python)
      echo "== python binding"
      # PYTHON_FROM_SOURCE=1: compile the kernels into the extension instead of linking the carried library.
      if [ "${PYTHON_FROM_SOURCE:-0}" = 1 ]; then
        bash python/run_gpu_checks.sh ${PYTHON_ARGS:-} > "$out/python.log" 2>&1
      else
        TILEKIT_KERNELS_LIB=/work/main/$build/kernels/libtilekit_kernels.a bash python/run_gpu_checks.sh ${PYTHON_ARGS:-} > "$out/python.log" 2>&1
      fi
      echo "python rc=$?"; tail -40 "$out/python.log" ;;
    bench)
      for b in ${BENCH_BINS:-}; do
        echo "== $b"; /work/main/$build/bench/$b --benchmark_out="$out/$b.json" --benchmark_out_format=json ${BENCH_ARGS:-} 2>&1 | tail -40
      done ;;
  esac
done
