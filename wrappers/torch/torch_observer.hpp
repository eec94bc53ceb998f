// sonde's RecordFunction callbacks: one per scope it records (FUNCTION, BACKWARD_FUNCTION,
// USER_SCOPE), so an event's scope is known without reading the RecordFunction object.
#pragma once

#include <atomic>

#include "torch_abi.hpp"

namespace sonde::torch_ops {

// libtorch's functions the callbacks read an event through (torch_attach.cpp fills them).
struct Reader {
  torch_abi::Name name = nullptr;
  torch_abi::InputSizes input_sizes = nullptr;
  torch_abi::InputTypes input_types = nullptr;  // nullptr: an old-ABI libtorch, bytes unknown
  torch_abi::EnableRecordFunction enable_record_function = nullptr;
  torch_abi::HasCallbacks has_thread_local_callbacks = nullptr;
};
extern Reader g_reader;
// Off: the callbacks record nothing (between sonde_torch_unobserve and the removal of
// callbacks that events already started still hold).
extern std::atomic<bool> g_recording;
// Ranks of the default process group (torch.distributed's world), for comm_ops' comm_size.
extern std::atomic<int> g_group_size;
// Whether an operator's own events may pass unobserved (torch_observer.cpp): both functions
// found, and no other global RecordFunction callback when sonde attached.
extern std::atomic<bool> g_pass_nested;
// The events a top-level operator's first calls must make each, on average, for it to pass
// them unobserved (torch_observer.cpp says why).
inline constexpr uint64_t kPassAt = 32;

// Pairs what the backend posted with this thread's c10d calls, and records those still without
// bytes with none (before the callbacks are removed at exit).
void settle_thread();

// Ends this thread's operations whose work has completed, before a wait of the program's own
// starts (Work.wait): they were in flight until it otherwise, the program's matmul between the
// post and the wait read all overlapped however soon the work ended.
void poll_thread();

// c10d calls recorded without bytes because more were waiting for their events on one thread
// than it keeps (1,024).
uint64_t calls_past_pending();

template <torch_abi::Scope S>
std::unique_ptr<torch_abi::ObserverContext> on_start(const torch_abi::RecordFunction& rf);
template <torch_abi::Scope S>
void on_end(const torch_abi::RecordFunction& rf, torch_abi::ObserverContext* ctx);

}  // namespace sonde::torch_ops
