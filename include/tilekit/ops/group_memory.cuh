#pragma once
// Cooperative global <-> shared tile and vector copies for any group of
// threads: tilekit::group<NumThreads> (a warp, a warpgroup, the whole block),
// plus the warp:: and warpgroup:: spellings. See ops/memory/global_shared.cuh
// for the synchronization contract (the caller synchronizes the group).

#include "tilekit/ops/memory/global_shared.cuh"
