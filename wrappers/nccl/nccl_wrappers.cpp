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
#define SONDE_TABLE_CONSTRUCTOR register_nccl
#define SONDE_NCCL(NAME, ...) SONDE_TABLE_ROW(NAME, {#NAME, sonde::kinds::kNccl, "nccl"})
#include "../wrapper_table.inc"
#undef SONDE_NCCL
#undef SONDE_TABLE_CONSTRUCTOR
#undef SONDE_TABLE

// Groups are per thread; these change on every call, measured or not, so they stay in step.
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_group_bytes __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint64_t t_ended_bytes __attribute__((tls_model("initial-exec"))) = 0;

sonde::RoutineChoice choose(Entry e) {
  if (e == Entry::ncclGroupStart) {
    ++t_depth;
  } else if (e == Entry::ncclGroupEnd && t_depth > 0 && --t_depth == 0) {
    t_ended_bytes = t_group_bytes;
    t_group_bytes = 0;
  }
  return {g_ids[size_t(e)]};
}

// Inside a group a collective only queues its work: its bytes are counted at the group's end.
sonde::CallCost in_group(sonde::CallCost c) {
  if (t_depth > 0) {
    t_group_bytes += c.bytes;
    c.bytes = 0;
    c.comm = {};  // its bytes are the group end's comm_ops row
  }
  return c;
}

sonde::CallCost group_end_cost() {
  sonde::CallCost c;
  c.bytes = t_ended_bytes;
  t_ended_bytes = 0;
  // The outermost end launches the group's operations: one comm_ops row with all their bytes.
  if (t_depth == 0) c.comm = sonde::CommCost{sonde::CommKind::kCollective, true, 0};
  return c;
}

}  // namespace

namespace sonde::nccl {
int comm_count(ncclComm_t comm) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  static const Fn count = reinterpret_cast<Fn>(find_real_symbol("ncclCommCount"));
  int n = 0;
  return comm != nullptr && count != nullptr && count(comm, &n) == ncclSuccess ? n : 0;
}
}  // namespace sonde::nccl

// The kernels a collective (or a group's end) launches show beneath it: kChildren.
#define SONDE_NCCL(NAME, RET, PARAMS, ARGS, MODEL)                                 \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kChildren, NAME, RET, PARAMS, ARGS, \
                     choose(Entry::NAME), in_group(MODEL))
#include "nccl_routines.def"
#undef SONDE_NCCL
