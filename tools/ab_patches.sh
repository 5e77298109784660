#!/usr/bin/env bash
# Sets up a same-run A/B of experiment patches (docs/experiments/NAME.patch) for
# tools/device_ab.sh, here, before the device call: .ab/base is the committed tree of REV (default
# HEAD), and each named patch becomes a side .ab/NAME, that tree with the patch applied. The
# working tree stays side "ours". Stops, with .ab/ removed, if a patch does not apply: a patch
# that rotted against main must be rebased before it can be measured.
#
# Usage, from the repository root:
#   tools/ab_patches.sh [--base REV] NAME...      e.g. tools/ab_patches.sh dead_groups overread_norms_softmax
#   then the device call (carry [".ab"]), e.g.
#     OURS=0 EXTRA_CUDA_FLAGS=-DTILEKIT_DEV_BF16_ONLY=1 BENCHES=bench_cross_entropy ROUNDS=2 \
#       FILTER='with_gradient(_vocab|_odd)/' tools/device_ab.sh
#   (OURS=0: the working tree is base's commit, so no side "ours"; without it, a change in the
#   working tree runs as side "ours" beside the patches)
# Each side adds its own build (~50 s of the 16-core machine for a bf16-only build of one
# benchmark, side by side with the others) and its runs: keep a call to three or four sides.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rev=HEAD
if [ "${1:-}" = --base ]; then
  rev=$2
  shift 2
fi
[ $# -ge 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
for name in "$@"; do
  [ -f "docs/experiments/$name.patch" ] || { echo "ab_patches.sh: no docs/experiments/$name.patch" >&2; exit 2; }
  [ "$name" != base ] && [ "$name" != ours ] || { echo "ab_patches.sh: '$name' is a reserved side name" >&2; exit 2; }
done
rm -rf .ab
mkdir -p .ab/base
git archive "$rev" | tar -x -C .ab/base
for name in "$@"; do
  cp -a .ab/base ".ab/$name"
  # git apply, not patch: it refuses a patch that does not apply exactly instead of applying
  # it with fuzz, and applies nothing when a hunk fails.
  if ! err=$(git apply --directory=".ab/$name" "docs/experiments/$name.patch" 2>&1); then
    echo "ab_patches.sh: docs/experiments/$name.patch does not apply to $rev:" >&2
    echo "$err" >&2
    rm -rf .ab
    exit 1
  fi
  echo ".ab/$name: $rev + docs/experiments/$name.patch"
done
echo ".ab/base: $rev"
