# Sourced by the device-machine scripts (tools/device_check.sh, tools/device_ab.sh): the one
# CMake configuration they build with, so that a warm machine's build/ is never reconfigured
# (and rebuilt from scratch) by going from one script to the other, plus their clock and log
# line. --split-compile=0 (nvcc compiles a file's kernels in parallel) halves a fresh build on
# the 16-core machine: ~230 s instead of ~520 s (2026-12-02).
export PATH=/usr/local/cuda/bin:$PATH
# EXTRA_CUDA_FLAGS adds to them, e.g. -DTILEKIT_DEV_BF16_ONLY=1 for a quick A/B of the norms
# (kernels/README.md; a different value reconfigures build/).
device_cmake_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEKIT_BUILD_EXAMPLES=OFF
                    "-DCMAKE_CUDA_FLAGS=--split-compile=0${EXTRA_CUDA_FLAGS:+ $EXTRA_CUDA_FLAGS}")
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
note() { echo "[$(elapsed)s] $*"; }
