// Expands nccl_routines.def into the interposed NCCL functions. libsonde is not linked against
// libnccl: each real function is looked up at its first call.
#include <nccl.h>

#include <array>
#include <cstddef>

#include "../intercept.hpp"
#include "nccl_models.hpp"

namespace {

namespace nccl = sonde::nccl;

#define SONDE_TABLE "nccl/nccl_routines.def"  // relative to wrapper_table.inc
#define SONDE_NCCL(NAME, ...) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_NCCL
#undef SONDE_TABLE
std::array<sonde::RoutineId, kCount> g_ids{};

__attribute__((constructor(200))) void register_nccl() {
  for (size_t i = 0; i < kCount; ++i) {
    g_ids[i] = sonde::register_routine({kNames[i], "nccl", "nccl"});
  }
}

}  // namespace

// The kernels a collective launches show beneath it: kChildren.
#define SONDE_NCCL(NAME, RET, PARAMS, ARGS, MODEL) \
  SONDE_INTERCEPT(g_real, g_ids, ::sonde::Nesting::kChildren, NAME, RET, PARAMS, ARGS, MODEL)
#include "nccl_routines.def"
#undef SONDE_NCCL
