// CUPTI's activity buffers: sonde hands CUPTI buffers to fill, copies each finished buffer's
// kernels, copies and memsets into compact records, and at every flush ties those records to
// the call paths that launched them and converts their times to sonde's clock.
#include <cxxabi.h>
#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/thread_local_state.hpp"
#include "gpu/cupti_backend.hpp"

namespace sonde {

namespace {
constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr size_t kAlignment = 8;         // CUPTI's requirement for activity buffers
constexpr uint32_t kOriginLifetime = 6;  // flushes a launch may wait for its records
// A forced flush can hang inside CUPTI at exit (a known CUPTI hang, worked around in Kineto by
// skipping the teardown flush): the exit goes on after this long without the records it held.
constexpr auto kFinalFlushTimeout = std::chrono::seconds(3);

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

const char* direction_name(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}
}  // namespace

void CuptiBackend::on_buffer_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
  if (*buffer == nullptr) no_buffer_.fetch_add(1, std::memory_order_relaxed);
}

void CuptiBackend::on_buffer_complete(CUcontext context, uint32_t stream, uint8_t* buffer,
                                      size_t size, size_t valid) {
  if (buffer == nullptr) return;
  if (!forked_.load(std::memory_order_relaxed)) parse_buffer(buffer, valid);
  // A process-wide call, which CUPTI refuses beside the subscriber-scope ones: a subscriber's
  // own buffers have no count of dropped records.
  size_t dropped = 0;
  if (!per_subscriber_.load(std::memory_order_relaxed) &&
      lib_.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
    cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
  std::free(buffer);
}

void CuptiBackend::parse_buffer(uint8_t* buffer, size_t valid) {
  std::lock_guard lock(records_mu_);
  CUpti_Activity* record = nullptr;
  ActivityFields f;
  // Read by the loaded CUPTI's layout (cupti_layouts.cpp): its records are its release's
  // versions, not those of the header sonde was built with. start() enables no kind without one.
  bool own = per_subscriber_.load(std::memory_order_relaxed);
  auto next = [&] {
    return own ? lib_.cuptiActivityGetNextRecord_v2(subscriber_, buffer, valid, &record)
               : lib_.cuptiActivityGetNextRecord(buffer, valid, &record);
  };
  while (next() == CUPTI_SUCCESS) {
    if (!read_activity(*layout_, record, f)) continue;  // kinds sonde did not ask for
    Record r;
    r.correlation = f.correlation;
    r.graph_node = f.graph_node;
    r.device = f.device;
    r.stream = f.stream;
    r.start = f.start;
    r.end = f.end;
    if (f.kind == kCuptiKernel || f.kind == kCuptiConcurrentKernel) {
      r.kind = 0;
      std::string name = f.name ? f.name : "(unnamed kernel)";
      auto [it, added] = name_index_.emplace(name, uint32_t(names_.size()));
      if (added) names_.push_back(demangle(name.c_str()));
      r.name = it->second;
      for (int i = 0; i < 3; ++i) r.grid[i] = f.grid[i], r.block[i] = f.block[i];
      r.registers = f.registers;
      r.shared_bytes = f.shared_bytes;
    } else if (f.kind == kCuptiMemset) {
      r.kind = 2;
      r.bytes = f.bytes;
    } else {
      r.kind = 1;  // a copy, peer-to-peer ones (MEMCPY2) included
      r.copy_kind = f.copy_kind;
      r.bytes = f.bytes;
    }
    records_.push_back(r);
    delivered_.fetch_add(1, std::memory_order_relaxed);
  }
}

GpuRow CuptiBackend::to_row(const Record& r, int64_t offset) {
  GpuRow row;
  static const char* const kKinds[] = {"kernel", "memcpy", "memset"};
  row.kind = kKinds[r.kind];
  if (r.kind == 0) {
    row.name = names_[r.name];
    for (int i = 0; i < 3; ++i) row.grid[i] = r.grid[i], row.block[i] = r.block[i];
    row.registers = r.registers;
    row.shared_bytes = r.shared_bytes;
  } else {
    row.name = r.kind == 1 ? direction_name(r.copy_kind) : "memset";
    row.bytes = int64_t(r.bytes);
  }
  row.device = r.device;
  row.stream = r.stream;
  row.start_ns = int64_t(r.start) + offset;
  row.end_ns = int64_t(r.end) + offset;
  return row;
}

void CuptiBackend::collect(std::vector<GpuRow>& out, bool final, const Clock& clock) {
  out = std::move(retry_);
  retry_.clear();
  if (forked_.load()) out.clear();  // the parent's records, for the parent's file
  if (final && !forked_.load()) {
    if (uint64_t beyond = beyond_table_.load(); beyond > 0) {
      uint32_t first = first_beyond_.load();
      note_("gpu-callbacks",
            fmt::format("{} CUDA API calls were not measured: CUPTI {} reported callback ids "
                        "beyond sonde's table for it (the first: {} id {})",
                        beyond, version_, first & 0x80000000u ? "driver" : "runtime",
                        first & 0x7fffffffu));
    }
  }
  if (!activity_.load() || forked_.load()) return;
  // Without the records lock: the completion callback runs inside this call and takes it.
  if (ceded_.load()) {
    // The other client's buffers, not sonde's: flushing them is not sonde's to do.
  } else if (!flushed_final_ && final) {
    final_flush();
  } else if (!flushed_final_) {
    lib_.cuptiActivityFlushAll(0);
  }
  // The offset between CUPTI's clock and sonde's, taken now: sonde's tick ratio is refreshed
  // at every flush, and CUPTI's clock need not be CLOCK_REALTIME.
  uint64_t before = now_ticks();
  uint64_t cupti_now = 0;
  lib_.cuptiGetTimestamp(&cupti_now);
  uint64_t after = now_ticks();
  int64_t offset = clock.to_realtime_ns(before + (after - before) / 2) - int64_t(cupti_now);

  // The collection window: a record of a launch made before it opened is held back, as the
  // launch itself was; one whose launch sonde did not see, when it started before the opening.
  int64_t window_opened = INT64_MIN;  // CUPTI's clock; INT64_MAX: not open yet
  if (window_.requested()) {
    int64_t opened = window_.opened_mono_ns();
    window_opened = opened == 0 ? INT64_MAX : clock.realtime0() + (opened - clock.mono0()) - offset;
  }
  std::vector<Record> records;
  std::unique_lock rlock(records_mu_);
  records.swap(records_);
  records.insert(records.begin(), held_.begin(), held_.end());
  held_.clear();
  std::lock_guard olock(origins_mu_);
  ++generation_;
  out.reserve(out.size() + records.size());
  for (const Record& r : records) {
    auto it = origins_.find(r.correlation);
    // In a metrics run CUPTI delivers the kernels its range profiler replayed without
    // timestamps (start = end = 0, which cupti_activity.h says means "could not be collected";
    // seen on an H200 with CUDA 13.0), the profiled launch's and any other that ran inside its
    // window: kept, untimed (the profiled one's duration is its gpu__time_duration.sum). Any
    // other record without them was unfinished.
    bool untimed = metrics_ && r.kind == 0 && r.start == 0 && r.end == 0 && it != origins_.end();
    if (!untimed && (r.start == 0 || r.end < r.start)) {
      incomplete_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (it != origins_.end() ? it->second.before_window : int64_t(r.start) < window_opened) {
      if (it != origins_.end()) it->second.seen = generation_;
      before_window_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // Held for a later flush, but not past the origin's lifetime (it would lose its path).
    if (it != origins_.end() && it->second.awaiting_metrics && r.kind == 0 && !final &&
        generation_ - it->second.generation < kOriginLifetime) {
      held_.push_back(r);
      continue;
    }
    GpuRow row = to_row(r, offset);
    attach_graph_origin(row, r.graph_node);
    if (untimed) {
      row.timed = false;
      untimed_.fetch_add(1, std::memory_order_relaxed);
    }
    if (it != origins_.end()) {
      row.thread = it->second.thread;
      row.node = it->second.node;
      row.node_id = it->second.node_id;
      if (r.kind == 0) row.metrics = std::move(it->second.metrics);
      it->second.seen = generation_;
    } else {
      unattributed_.fetch_add(1, std::memory_order_relaxed);
    }
    out.push_back(std::move(row));
  }
  rlock.unlock();
  // A kernel launch, copy or memset makes one record and is done with at the first. All the
  // kernels of one graph launch share its correlation id and finish over any number of flushes:
  // its origin stays until none has come for the origin's lifetime. A launch never followed
  // by any record (a host function, a launch that failed) is forgotten after as long.
  std::erase_if(origins_, [&](const auto& entry) {
    const Origin& o = entry.second;
    if (o.seen != 0 && !o.graph) return true;
    return generation_ - (o.seen != 0 ? o.seen : o.generation) > kOriginLifetime;
  });
  std::erase_if(graph_nodes_, [&](const auto& entry) {
    uint32_t gone = entry.second.gone;
    return gone != 0 && generation_ + 1 - gone > kOriginLifetime;
  });
  if (final) {
    uint64_t dropped = cupti_dropped_ + no_buffer_ + origins_full_;
    if (dropped > 0 || incomplete_ > 0) {
      note_("gpu-drops",
            fmt::format("GPU activity lost: {} records dropped by CUPTI, {} buffers that could "
                        "not be allocated, {} launches beyond the correlation table, {} records "
                        "unfinished at exit",
                        cupti_dropped_.load(), no_buffer_.load(), origins_full_.load(),
                        incomplete_.load()));
    }
    if (graph_nodes_full_ > 0) {
      note_("gpu-graphs",
            fmt::format("{} CUDA graph nodes were created while sonde's table of graph node "
                        "origins was full: the work they ran is counted under the replaying "
                        "call (cudaGraphLaunch) only, with no capture path",
                        graph_nodes_full_.load()));
    }
    if (unattributed_ > 0) {
      note_("gpu-unattributed",
            fmt::format("{} GPU activity records came from launches sonde did not see (before "
                        "it subscribed, or from another CUPTI client); they have no call path",
                        unattributed_.load()));
    }
  }
}

void CuptiBackend::final_flush() {
  flushed_final_ = true;
  closing_.store(true);  // another client's later unsubscribe must not subscribe sonde again
  // No callback may reach sonde once its file is being closed (CUDA calls from the host's static
  // destructors, after sonde's last flush): the subscriber goes first. A subscriber with
  // records of its own loses them when it unsubscribes (the CUPTI guide's teardown flushes
  // first), so it only stops its callbacks here, and unsubscribes after the flush.
  bool unsubscribe_after = false;
  if (traced_.exchange(false)) {
    if (per_subscriber_.load()) {
      for (CUpti_CallbackDomain d :
           {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RESOURCE}) {
        lib_.cuptiEnableDomain(0, subscriber_, d);
      }
      unsubscribe_after = true;
    } else {
      lib_.cuptiUnsubscribe(subscriber_);
    }
  }
  struct Call {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    CUptiResult rc = CUPTI_SUCCESS;
  };
  auto call = std::make_shared<Call>();
  auto flush = lib_.cuptiActivityFlushAll;
  std::thread worker([call, flush] {
    t_internal = true;  // the completion callback runs here: nothing of it is the host's
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    CUptiResult rc = flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(call->mu);
    call->rc = rc;
    call->done = true;
    call->done_cv.notify_all();
  });
  std::unique_lock lock(call->mu);
  if (!call->done_cv.wait_for(lock, kFinalFlushTimeout, [&] { return call->done; })) {
    lock.unlock();
    worker.detach();  // stuck in CUPTI; the process ends around it
    note_("gpu", fmt::format("CUPTI's last activity flush did not return within {} s: the GPU "
                             "records it still held are not in the profile",
                             kFinalFlushTimeout.count()));
    return;
  }
  CUptiResult rc = call->rc;
  lock.unlock();
  worker.join();
  if (unsubscribe_after) lib_.cuptiUnsubscribe(subscriber_);
  if (rc != CUPTI_SUCCESS) {
    note_("gpu",
          fmt::format("CUPTI could not flush its last activity records: {}", lib_.describe(rc)));
  }
}

void CuptiBackend::on_context_destroyed(CUcontext context) {
  if (forked_.load(std::memory_order_relaxed)) return;
  if (metrics_) metrics_->context_destroyed(context);
  // The context's records go with it: taken now (the collecting flush converts them). Not
  // forced: its work is finished (destroying a context synchronises it first), so its records
  // are complete, and a forced flush is what can hang inside CUPTI during teardown.
  if (activity_.load(std::memory_order_acquire) && !ceded_.load()) {
    lib_.cuptiActivityFlushAll(0);
    contexts_flushed_.fetch_add(1, std::memory_order_relaxed);
  }
}

void CuptiBackend::requeue(std::vector<GpuRow>&& rows) {
  for (GpuRow& r : rows) retry_.push_back(std::move(r));
}

void CuptiBackend::thread_gone(const ThreadState* thread, const HugeVector<int64_t>& node_ids) {
  auto resolve = [&](const ThreadState*& t, uint32_t node, int64_t& node_id) {
    if (t != thread) return;
    node_id = node < node_ids.size() ? node_ids[node] : 0;
    t = nullptr;
  };
  for (GpuRow& r : retry_) {
    resolve(r.thread, r.node, r.node_id);
    resolve(r.origin_thread, r.origin_node, r.origin_node_id);
  }
  if (forked_.load()) return;
  std::lock_guard lock(origins_mu_);
  for (auto& [correlation, o] : origins_) resolve(o.thread, o.node, o.node_id);
  for (auto& [id, o] : graph_nodes_) resolve(o.thread, o.node, o.node_id);
}

void CuptiBackend::info(std::vector<std::pair<std::string, std::string>>& out) const {
  // A fork child's numbers are its parent's, and another parent thread may have held the
  // metrics lock at the fork.
  if (forked_.load()) return;
  out.emplace_back("gpu.cupti_version", std::to_string(version_));
  out.emplace_back("gpu.cupti_activity",
                   per_subscriber_.load() ? "per-subscriber" : "process-wide");
  if (layout_ != nullptr) {
    out.emplace_back("gpu.cupti_records",
                     fmt::format("CUDA {}: {}", layout_->cuda, layout_->records));
  }
  if (!activity_.load()) return;
  if (metrics_) metrics_->info(out);
  out.emplace_back("gpu.records", std::to_string(delivered_.load()));
  out.emplace_back("gpu.dropped", std::to_string(cupti_dropped_ + no_buffer_ + origins_full_));
  out.emplace_back("gpu.unattributed", std::to_string(unattributed_.load()));
  if (untimed_ > 0) out.emplace_back("gpu.untimed", std::to_string(untimed_.load()));
  out.emplace_back("gpu.graph_records", std::to_string(graph_records_.load()));
  out.emplace_back("gpu.graph_unknown", std::to_string(graph_unknown_.load()));
  if (graph_nodes_full_ > 0)
    out.emplace_back("gpu.graph_nodes_full", std::to_string(graph_nodes_full_.load()));
  if (before_window_ > 0)
    out.emplace_back("gpu.before_window", std::to_string(before_window_.load()));
  out.emplace_back("gpu.contexts_flushed", std::to_string(contexts_flushed_.load()));
}

}  // namespace sonde
