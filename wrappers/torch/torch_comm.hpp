// Bytes of torch.distributed's calls, paired with the calls they belong to. A c10d call on the
// caller's thread only enqueues work; its tensors' sizes and dtypes are read from the backend's
// own work event (gloo:all_reduce, nccl:..., mpi:...). NCCL starts that event inside the c10d
// call, on the caller's thread; gloo (1.13) starts it on one of its own threads, later. Those
// events are posted here, and the caller pairs each with its oldest c10d call of the same
// operation still waiting for bytes that started before the event was posted (first in, first
// out, as the backend's queue runs them).
//
// Some work has an event and no c10d call: torch 1.13's all_reduce_coalesced and
// all_to_all_single call the process group directly. Such an event is no call's: it is passed
// over, never paired with the next call of its operation, and counted (unmatched_transfers).
#pragma once

#include <cstdint>

namespace sonde::torch_ops {

// The operation a name stands for, for pairing: "c10d::allreduce_" and "gloo:all_reduce" are
// the same (namespace, underscores and a trailing in-place mark dropped).
uint32_t operation_key(const char* name);

// A backend event's bytes, from whichever thread started it; `name` (the event's, interned: it
// outlives the ring) for the count of unmatched ones. Lock-free; a full ring drops it.
void post_transfer(uint32_t key, uint64_t bytes, const char* name);

// post_transfer's two steps: the event's index is claimed (kFull: the ring is full, dropped),
// then its slot written. Between them a taker stops at the slot, as at an event not posted.
constexpr uint64_t kFull = ~uint64_t(0);
uint64_t claim_transfer();
void publish_transfer(uint64_t index, uint32_t key, uint64_t bytes, const char* name);

// Waits until every event claimed so far is written, at most about 100 ms: the thread that
// claims a slot writes it a few instructions later, unless the scheduler takes its CPU in
// between. Before calls are settled for good (a thread's end, the end of recording): a side
// thread's last all_reduce, its event claimed behind a gloo thread's of the main thread's, was
// settled without bytes once in a CI run.
void await_posting();

// How many events were ever posted: a call started now can only be paired with event indexes at
// or above this.
uint64_t transfers_posted();

// Takes the oldest posted event not yet taken for which `wanted(key, index, ctx)` says it is the
// caller's (a call of its own waits for that operation, and started before event `index`):
// false when there is none. Events another thread wants are left for it. An event the caller
// does not want with 128 newer ones behind it is no call's and is passed over (counted).
bool take_transfer(bool (*wanted)(uint32_t key, uint64_t index, const void* ctx), const void* ctx,
                   uint32_t& key, uint64_t& bytes, uint64_t& index);

// Counts every event still untaken as no call's (the end of recording).
void pass_over_untaken();

// Events passed over as no call's, by name: `visit(name, count)` for each, at most 16 names.
void unmatched_transfers(void (*visit)(const char* name, uint64_t count, void* ctx), void* ctx);

}  // namespace sonde::torch_ops
