#!/usr/bin/env bash
# Static checks that need no GPU, run by .ci/run before the build (about a
# minute on 2 cores; most of it is compiling the kernels of the PTX table).
#
#   1. generated code is up to date: tools/gen_wgmma.py --check (when present);
#   2. every public header starts with #pragma once;
#   3. PTX/ptxas checks: each source in PTX_CHECKS is compiled for sm_90a with
#      -Xptxas -v; its PTX must contain the listed instructions (proof that the
#      fast path is really taken: wgmma, TMA ...), ptxas must report 0 bytes of
#      spill stores/loads for every function, and no C7508 (setmaxnreg
#      ignored), C7511 (wgmma serialized), C7517/C7519 (wgmma wait/arrive
#      injected) info line, which ptxas prints instead of failing;
#   4. the CPU model of the GPU tests' backward and softmax checks (tools/test_strength.cpp):
#      with the tests' inputs, a correct kernel passes and each modelled bug fails;
#   5. tools/perf_table.py --self-test (the performance table and its target check) and
#      tools/ncu_source.py --self-test (the ncu source-view summary);
#   6. whether each experiment patch (docs/experiments/*.patch) still applies to the tree: a
#      warning, not a failure (main may move on; the patch is rebased before it is measured,
#      tools/ab_patches.sh).
#
# Usage:
#   tools/ci_checks.sh                         all checks
#   tools/ci_checks.sh --ptx 'SRC|INSTR ...'   only the PTX checks, on the given entries
#                                              (e.g. while writing a kernel)
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc).
set -euo pipefail
cd "$(dirname "$0")/.."

# --- the PTX table: "source|required PTX instructions" -------------------------
# source: a .cu file or a directory (all its *.cu). Entries whose source does
# not exist yet are reported and skipped, so the table can name planned kernels.
PTX_CHECKS=(
  "examples/02_gemm|wgmma.mma_async cp.async.bulk.tensor"
)
# ptxas info lines that mean the compiled code is not what was written.
FORBIDDEN_PTXAS_INFO='C7508|C7511|C7517|C7519'

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fail() { printf 'ci_checks: FAILED: %s\n' "$*" >&2; exit 1; }
note() { printf 'ci_checks: %s\n' "$*"; }

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# shellcheck disable=SC2054  # the commas belong to nvcc's -gencode value
NVCC_FLAGS=(-std=c++20 --expt-relaxed-constexpr --extended-lambda -lineinfo
            -gencode=arch=compute_90a,code=sm_90a -Iinclude -Xptxas -v)

check_generated_code() {
  if [ -f tools/gen_wgmma.py ]; then
    python3 tools/gen_wgmma.py --check || fail "generated wgmma wrappers are out of date: run python3 tools/gen_wgmma.py and commit the result"
    note "generated code is up to date (tools/gen_wgmma.py --check)"
  else
    note "tools/gen_wgmma.py not present: generated-code check skipped"
  fi
}

check_pragma_once() {
  local missing=()
  while IFS= read -r -d '' header; do
    # The first line that is not blank and not a // comment must be #pragma once.
    local first
    first=$(grep -v -E '^[[:space:]]*(//.*)?$' "$header" | head -n 1 || true)
    [ "$first" = "#pragma once" ] || missing+=("$header")
  done < <(find include -name '*.cuh' -print0 | sort -z)
  [ ${#missing[@]} -eq 0 ] || fail "public headers without a leading '#pragma once': ${missing[*]}"
  note "every public header starts with #pragma once"
}

# check_ptx_entry "SRC|INSTR INSTR ..."
check_ptx_entry() {
  local source=${1%%|*} required=${1#*|}
  local sources=()
  if [ -d "$source" ]; then
    mapfile -t sources < <(find "$source" -maxdepth 1 -name '*.cu' | sort)
  elif [ -f "$source" ]; then
    sources=("$source")
  fi
  if [ ${#sources[@]} -eq 0 ]; then
    note "PTX check: $source not present, skipped"
    return 0
  fi
  [ -x "$NVCC" ] || command -v "$NVCC" >/dev/null || fail "nvcc not found (set NVCC=/path/to/nvcc): needed for the PTX checks"

  local work; work=$(mktemp -d "$WORK/ptx.XXXXXX")
  local ptx_all="$work/all.ptx" ptxas_all="$work/ptxas.txt"
  : >"$ptx_all"; : >"$ptxas_all"
  local src
  for src in "${sources[@]}"; do
    local keep
    keep="$work/keep_$(basename "$src" .cu)"
    mkdir -p "$keep"
    if ! "$NVCC" "${NVCC_FLAGS[@]}" -c "$src" -o "$keep/out.o" --keep --keep-dir "$keep" 2>"$keep/ptxas.txt"; then
      cat "$keep/ptxas.txt" >&2
      fail "$src does not compile for sm_90a"
    fi
    cat "$keep"/*.ptx >>"$ptx_all"
    cat "$keep/ptxas.txt" >>"$ptxas_all"
  done

  local problems=()
  local instruction
  for instruction in $required; do
    grep -q -F "$instruction" "$ptx_all" || problems+=("PTX has no '$instruction'")
  done
  # "Function properties for F" is followed by "N bytes stack frame, N bytes spill stores, N bytes spill loads".
  local spills
  spills=$(awk '/Function properties for/ { fn = $NF }
                /bytes spill stores/ { split($0, f, ","); for (i in f) if (f[i] ~ /spill/ && f[i] + 0 > 0) { print "  " fn ":" f[i]; } }' \
           "$ptxas_all")
  [ -z "$spills" ] || problems+=("ptxas reports spills:"$'\n'"$spills")
  local info
  info=$(grep -E "$FORBIDDEN_PTXAS_INFO" "$ptxas_all" || true)
  [ -z "$info" ] || problems+=("ptxas info lines that mean serialized or repaired code:"$'\n'"$info")

  local kernels
  kernels=$(grep -c "Compiling entry function" "$ptxas_all" || true)
  if [ ${#problems[@]} -gt 0 ]; then
    printf 'ci_checks: %s (%s):\n' "$source" "${sources[*]}" >&2
    printf '  - %s\n' "${problems[@]}" >&2
    fail "PTX check of $source"
  fi
  note "PTX check: $source: $kernels kernel(s) for sm_90a contain [$required], 0 bytes spilled, no ${FORBIDDEN_PTXAS_INFO//|/\/} info"
}

if [ "${1:-}" = "--ptx" ]; then
  shift
  [ $# -gt 0 ] || fail "--ptx needs at least one 'SRC|INSTR ...' entry"
  for entry in "$@"; do check_ptx_entry "$entry"; done
  exit 0
fi

check_test_strength() {
  local cxx=${CXX:-c++}
  "$cxx" -O2 -std=c++17 -o "$WORK/test_strength" tools/test_strength.cpp || fail "tools/test_strength.cpp does not compile"
  "$WORK/test_strength" > "$WORK/test_strength.log" ||
    { cat "$WORK/test_strength.log" >&2; fail "tools/test_strength.cpp: the tests' inputs no longer separate correct from buggy"; }
  note "test strength: with the GPU tests' inputs a correct kernel passes and every modelled bug fails (tools/test_strength.cpp)"
}

check_perf_table() {
  python3 tools/perf_table.py --self-test || fail "tools/perf_table.py --self-test failed"
  note "perf table: tools/perf_table.py builds the table and finds the cells under target (self-test)"
  python3 tools/ncu_source.py --self-test || fail "tools/ncu_source.py --self-test failed"
  note "ncu source view: tools/ncu_source.py summarizes a made-up kernel as expected (self-test)"
}

check_experiment_patches() {
  local patch stale=()
  for patch in docs/experiments/*.patch; do
    [ -f "$patch" ] || continue
    git apply --check "$patch" 2> /dev/null || stale+=("$patch")
  done
  if [ ${#stale[@]} -eq 0 ]; then
    note "experiment patches: every docs/experiments/*.patch applies to this tree"
  else
    note "WARNING: experiment patches that no longer apply (rebase before measuring): ${stale[*]}"
  fi
}

check_generated_code
check_pragma_once
check_experiment_patches
check_test_strength
check_perf_table
for entry in "${PTX_CHECKS[@]}"; do check_ptx_entry "$entry"; done
note "all static checks passed"
