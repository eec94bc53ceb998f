// The optional sampler of the gaps (SONDE_SAMPLE_HZ): a per-thread CPU-time timer whose signal
// records the node of sonde's shadow stack the thread is in and the native frames below it
// (cfi_unwind.hpp), into a ring preallocated per thread. Samples are counted apart from the exact
// figures: they go to the `samples` table, never into a node's calls or times.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "process/cfi_unwind.hpp"

namespace sonde {

class ThreadState;

// Deep enough for a framework's C++ between a Python frame and a BLAS kernel; deeper stacks
// keep their innermost frames.
constexpr uint32_t kSampleFrames = 32;

struct Sample {
  uint32_t node;
  uint32_t frames;
  // Periods of CPU time this sample stands for: the kernel checks CPU-time timers at its tick
  // (250 Hz on many kernels), so at 1 kHz one signal comes for several periods (the overrun).
  uint32_t weight;
  uintptr_t pc[kSampleFrames];  // innermost first
};

// Single producer (the owner's signal handler), single consumer (the flusher), no allocation
// after construction. A full ring drops the sample and counts it.
class SampleRing {
 public:
  explicit SampleRing(uint32_t capacity) : slots_(new Sample[capacity]), capacity_(capacity) {}
  Sample* reserve() {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) == capacity_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    return &slots_[h % capacity_];
  }
  void commit() {
    head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  template <class F>
  void drain(F&& consume) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    uint64_t h = head_.load(std::memory_order_acquire);
    for (; t != h; ++t) consume(slots_[t % capacity_]);
    tail_.store(t, std::memory_order_release);
  }
  void clear() { tail_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<Sample[]> slots_;
  uint32_t capacity_;
  std::atomic<uint64_t> head_{0}, tail_{0}, dropped_{0};
};

// One thread's samples: the ring the handler fills, and what the flusher made of it so far
// (node, native frames root first) -> count. The counts are totals since the thread started.
struct ThreadSamples {
  explicit ThreadSamples(uint32_t capacity) : ring(capacity) {}
  SampleRing ring;
  CfiCache unwind;  // the rules of the frames this thread's samples went through
  // The handler's own time (clock ticks) over the samples it kept: SONDE_LOG=debug's figure.
  std::atomic<uint64_t> handler_ticks{0}, handled{0};
  timer_t timer{};
  // The thread's perf_event CPU clock when it could be opened (else `timer`); kept after
  // disarming, so a signal it had already queued is still told from a host's.
  int perf_fd = -1;
  bool armed = false;
  std::map<std::pair<uint32_t, std::vector<uintptr_t>>, uint64_t> counts;
};

// Once per process, before any thread is armed: false (and sampling stays off) when the
// signal or the timers cannot be had.
bool sampler_init(uint32_t hz);
bool sampler_on();
int sampler_signal();
// On the thread itself: creates its ring and timer. Slow path; allocation allowed.
void sampler_arm(ThreadState& t);
// A thread of the process that sonde did not attach (a library's worker pool started before
// sonde's constructor, or a thread that never makes a measured call): armed from the thread
// that calls this, on `t.tid()`'s CPU clock, its samples counted in `t` under its root. False
// when the timer cannot be had (the thread is gone).
bool sampler_arm_other(ThreadState& t);
// The state armed for thread `tid` by sampler_arm_other, now taken over by the thread itself
// (its first measured call); null when there is none.
ThreadState* sampler_adopt(pid_t tid);
// In a fork child: the other threads' timers and states are the parent's (`others`: the
// parent's thread states, whose event descriptors the child holds copies of).
void sampler_forget_others(const std::vector<ThreadState*>& others);
// In a fork child, on its one thread: forgets the parent's samples and arms a timer of its own.
void sampler_fork_child(ThreadState& t);
// On the thread itself, as it ends; also in a fork child (the parent's timers are not the
// child's, and a child is re-armed with sampler_arm).
void sampler_disarm(ThreadState& t);
// Moves each sample of the ring into the thread's counts (flusher, under the store lock).
void sampler_drain(ThreadState& t);
// Called by sonde's signal handler for a signal the sampler's timers sent.
bool sampler_owns(int sig, const siginfo_t* info);
void sampler_on_signal(const siginfo_t* info, void* context);
// A SIGSEGV or SIGBUS raised by the unwinder itself (a frame without unwind information read
// as garbage): abandons that sample and returns from the sampler's handler; does not return.
// False when the fault is not the sampler's (the host's own, handled as always).
bool sampler_escape_fault();
uint64_t sampler_faults();  // samples abandoned so
// At the exit flush (SONDE_LOG=debug): how the threads' stacks were walked.
void sampler_log_unwinding(const std::vector<ThreadState*>& threads, double ns_per_tick);

}  // namespace sonde
