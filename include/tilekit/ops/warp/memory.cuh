#pragma once
// Warp-scope memory moves, all in namespace tilekit::warp:
//
//   registers <-> global   load(rt&, const gl<U>&, coord)    store(const gl<U>&, const rt&, coord)
//                          load(rv&, const U*, n_valid)      store(U*, const rv&, n_valid)
//   registers <-> shared   load(rt&, const st&, row0, col0)  store(st&, const rt&, row0, col0)
//                          load(rv&, const sv&)              store(sv&, const rv&)
//   shared <-> global      load_async / load / store on st and sv, async_commit, async_wait<N>
//                          (the 32 lanes cooperate: group<32>, see global_shared.cuh)
//
// Conventions (destination first, tile top-left at `coord`, zero-filled loads
// and dropped stores outside the tensor) are described in each header.

#include "tilekit/ops/memory/global_register.cuh"
#include "tilekit/ops/memory/global_shared.cuh"
#include "tilekit/ops/memory/shared_register.cuh"
