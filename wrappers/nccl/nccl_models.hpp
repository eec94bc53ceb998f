// Byte model of the NCCL collectives sonde intercepts (docs/gpu.md): a call's bytes are its
// element count times the element size, the count as the call names it (per rank: AllGather's
// sendcount, ReduceScatter's recvcount, Gather's and Scatter's count), except AlltoAll's,
// whose count is per peer. No FLOPs: a reduction's additions are not the point.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::nccl {

constexpr int64_t element_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// The communicator's rank count, through the NCCL the host uses (0: unknown).
int comm_count(ncclComm_t comm);

constexpr CallCost moved(size_t count, ncclDataType_t t) {
  CallCost c;
  c.bytes = uint64_t(count) * uint64_t(element_size(t));
  return c;
}

// Also a row of comm_ops (docs/distributed.md): enqueued on a stream, so no request to track.
inline CallCost collective(size_t count, ncclDataType_t t, ncclComm_t comm) {
  CallCost c = moved(count, t);
  c.comm = CommCost{CommKind::kCollective, true, comm_count(comm)};
  return c;
}
// ncclAlltoAll's count is what a rank sends to each peer: its buffer holds count values per
// rank of the communicator (count alone where the rank count cannot be asked).
inline CallCost all_to_all(size_t count, ncclDataType_t t, ncclComm_t comm) {
  int ranks = comm_count(comm);
  CallCost c = moved(count * size_t(ranks > 0 ? ranks : 1), t);
  c.comm = CommCost{CommKind::kCollective, true, ranks};
  return c;
}
inline CallCost p2p(size_t count, ncclDataType_t t, ncclComm_t comm) {
  CallCost c = moved(count, t);
  c.comm = CommCost{CommKind::kP2P, true, comm_count(comm)};
  return c;
}

}  // namespace sonde::nccl
