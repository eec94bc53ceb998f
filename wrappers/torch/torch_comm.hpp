// Bytes of torch.distributed's calls, paired with the calls they belong to. A c10d call on the
// caller's thread only enqueues work; its tensors' sizes and dtypes are read from the backend's
// own work event (gloo:all_reduce, nccl:..., mpi:...). NCCL starts that event inside the c10d
// call, on the caller's thread; gloo (1.13) starts it on one of its own threads, later. Those
// events are posted here, and the caller pairs each with its oldest c10d call of the same
// operation still waiting for bytes (first in, first out, as the backend's queue runs them).
#pragma once

#include <cstdint>

namespace sonde::torch_ops {

// The operation a name stands for, for pairing: "c10d::allreduce_" and "gloo:all_reduce" are
// the same (namespace, underscores and a trailing in-place mark dropped).
uint32_t operation_key(const char* name);

// A backend event's bytes, from whichever thread started it. Lock-free; a full ring drops it.
void post_transfer(uint32_t key, uint64_t bytes);

// Takes the oldest posted event not yet taken by any thread when `wanted(key, ctx)` says it is
// the caller's (a call of its own waits for that operation): false when none is posted, or the
// oldest is another thread's, which that thread takes. An oldest event that no thread took while
// kStale more were posted behind it is taken all the same (its call's thread is gone), so it
// cannot hold the others back.
bool take_transfer(bool (*wanted)(uint32_t key, const void* ctx), const void* ctx, uint32_t& key,
                   uint64_t& bytes);

}  // namespace sonde::torch_ops
