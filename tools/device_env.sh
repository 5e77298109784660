# Sourced by the device-machine scripts (tools/device_check.sh, tools/device_ab.sh, tools/device_ncu.sh,
# tools/device_margins.sh): the one CMake configuration they build with, so that a warm
# machine's build/ is never reconfigured (and rebuilt from scratch) by going from one script to
# the other, plus their clock, log line, time left and build step. --split-compile=0 (nvcc
# compiles a file's kernels in parallel) halves a fresh build on the 16-core machine: ~230 s
# instead of ~520 s (2026-12-02).
export PATH=/usr/local/cuda/bin:$PATH
# EXTRA_CUDA_FLAGS adds to them, e.g. -DTILEKIT_DEV_BF16_ONLY=1 for a quick A/B of the norms
# (kernels/README.md; a different value reconfigures build/).
device_cmake_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEKIT_BUILD_EXAMPLES=OFF
                    "-DCMAKE_CUDA_FLAGS=--split-compile=0${EXTRA_CUDA_FLAGS:+ $EXTRA_CUDA_FLAGS}")
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
note() { echo "[$(elapsed)s] $*"; }
# Seconds left before the calling script's $deadline, at least 1: a timeout for its next step.
left() { local l=$((deadline - $(elapsed))); echo $((l > 1 ? l : 1)); }
# Configure build/ and build the given targets, logging to $1; on failure print the errors and exit.
device_build() {
  local log=$1
  shift
  if ! { cmake -S . -B "$PWD/build" "${device_cmake_flags[@]}" > "$log" 2>&1 &&
         cmake --build "$PWD/build" -j"$(nproc)" --target "$@" >> "$log" 2>&1; }; then
    note "build failed"; grep -B2 -A10 "error" "$log" | head -60; exit 1
  fi
}
# Build the given targets for several source trees side by side (tools/device_ab.sh,
# tools/device_ncu.sh): side "ours" is the working tree in build/, any other side <name> the tree
# .ab/<name> in build-ab-<name>/. Usage: build_sides "base ours" target...; fills side_build
# (side -> build folder); on a failed build prints the end of its log and exits.
declare -A side_build
build_sides() {
  local -a sides
  read -r -a sides <<< "$1"
  shift
  local side src dir failed=0
  local -A builder
  for side in "${sides[@]}"; do
    if [ "$side" = ours ]; then src=.; dir=build; else src=.ab/$side; dir=build-ab-$side; fi
    side_build[$side]=$dir
    (cmake -S "$src" -B "$dir" "${device_cmake_flags[@]}" && cmake --build "$dir" -j"$(nproc)" --target "$@") \
      > "/tmp/build_$side.log" 2>&1 &
    builder[$side]=$!
  done
  for side in "${sides[@]}"; do
    wait "${builder[$side]}" || { echo "== build of side $side failed"; tail -30 "/tmp/build_$side.log"; failed=1; }
  done
  [ "$failed" = 0 ] || exit 1
  note "built ${sides[*]}"
}
