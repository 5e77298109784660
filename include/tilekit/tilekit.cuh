#pragma once
// tilekit: tile primitives for NVIDIA Hopper (sm_90a). Includes everything.

#include "tilekit/core/device.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"
#include "tilekit/tiles/shared.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"
