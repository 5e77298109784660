#pragma once
// tilekit: tile primitives for NVIDIA Hopper (sm_90a). Includes everything.

// core: dtypes, numeric helpers, errors, device queries
#include "tilekit/core/device.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/core/util.cuh"

// tiles: the types
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"
#include "tilekit/tiles/shared.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"
#include "tilekit/tiles/tma_descriptor.cuh"

// ops: warp scope (register ops, mma.sync, loads/stores)
#include "tilekit/ops/warp/memory.cuh"
#include "tilekit/ops/warp/register_ops.cuh"
// ops: cooperative global <-> shared copies (warp, warpgroup, any group)
#include "tilekit/ops/group_memory.cuh"
// ops: TMA
#include "tilekit/ops/memory/tma.cuh"
// ops: warpgroup wgmma
#include "tilekit/ops/warpgroup/mma.cuh"
#include "tilekit/ops/warpgroup/tile_io.cuh"
// ops: synchronization
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/ops/sync/named_barrier.cuh"

// pipeline: stage rings, warp specialization, persistent schedulers
#include "tilekit/pipeline/row_stream.cuh"
#include "tilekit/pipeline/scheduler.cuh"
#include "tilekit/pipeline/stage_ring.cuh"
#include "tilekit/pipeline/warp_specialization.cuh"
