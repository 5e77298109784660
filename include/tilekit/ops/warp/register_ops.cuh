#pragma once
// All warp-scope register operations (tilekit::warp): fills, element-wise
// maps, row/column reductions and broadcasts, masks, element-type
// conversions, layout swaps and transposes, and mma.sync GEMMs on register
// tiles. Memory moves live in ops/warp/memory.cuh.

#include "tilekit/ops/warp/broadcasts.cuh"
#include "tilekit/ops/warp/common.cuh"
#include "tilekit/ops/warp/conversions.cuh"
#include "tilekit/ops/warp/fill.cuh"
#include "tilekit/ops/warp/layout.cuh"
#include "tilekit/ops/warp/maps.cuh"
#include "tilekit/ops/warp/masks.cuh"
#include "tilekit/ops/warp/mma.cuh"
#include "tilekit/ops/warp/reductions.cuh"
