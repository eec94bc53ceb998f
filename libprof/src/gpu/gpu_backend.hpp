// The GPU side of the measurement, as the runtime sees it: a source of finished GPU activity
// (kernels, copies, memsets) tied to the CPU call paths that launched them. CUPTI is the only
// implementation; builds without its headers get none, and the runtime then never asks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/huge_pages.hpp"
#include "core/window.hpp"
#include "counters/counter_backend.hpp"  // NoteSink

namespace sonde {

class ThreadState;

// Per-kernel hardware metrics (SONDE_GPU_METRICS): metric name and value, in the order asked.
using MetricValues = std::vector<std::pair<std::string, double>>;

// One finished GPU activity, converted to sonde's time base (CLOCK_REALTIME-based ns, like
// trace_events). The launching call path is (thread, node) while that thread's state lives, or
// node_id once its state was written and freed; neither when it is unknown.
struct GpuRow {
  const ThreadState* thread = nullptr;
  uint32_t node = 0;
  int64_t node_id = 0;
  // Work a CUDA graph ran: the call path its graph node was created in (captured or added),
  // as (origin_thread, origin_node) or origin_node_id like the launching path; none otherwise.
  const ThreadState* origin_thread = nullptr;
  uint32_t origin_node = 0;
  int64_t origin_node_id = 0;
  const char* kind = "";  // 'kernel', 'memcpy', 'memset' (static strings)
  std::string name;       // demangled kernel name; 'memcpy HtoD', 'memset'
  int64_t device = 0, stream = 0;
  int64_t start_ns = 0, end_ns = 0;
  // false: CUPTI could not time it (a kernel its range profiler replayed, SONDE_GPU_METRICS):
  // written without times, its duration in gpu_metrics (gpu__time_duration.sum)
  bool timed = true;
  int64_t bytes = -1;  // -1: none (kernels)
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int32_t registers = -1, shared_bytes = -1;  // -1: none (copies, memsets)
  MetricValues metrics;                       // kernels, when metrics were recorded
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // Subscribes and enables the activity records; false (after one note) when CUPTI refuses.
  // Called once the runtime can reach the backend, since CUPTI may call back at once.
  virtual bool start() = 0;
  // True while CUDA runtime and driver calls are measured through CUPTI's callbacks.
  virtual bool api_traced() const = 0;
  // Flushing thread: moves every finished record into `out`. `final` (exit, signal) also takes
  // records of buffers that are not full or hold unfinished work.
  virtual void collect(std::vector<GpuRow>& out, bool final, const Clock& clock) = 0;
  // A flush that collected `rows` failed: they go out with the next one.
  virtual void requeue(std::vector<GpuRow>&& rows) = 0;
  // `thread`'s state is about to be freed; `node_ids` are the rows its nodes were written to.
  virtual void thread_gone(const ThreadState* thread, const HugeVector<int64_t>& node_ids) = 0;
  // In a fork child the driver is unusable: drop the parent's state and stop asking CUPTI.
  virtual void fork_child() = 0;
  // Running totals for run_info (gpu.records, gpu.dropped, ...), so a crash still shows them.
  virtual void info(std::vector<std::pair<std::string, std::string>>& out) const = 0;
};

// Loads libcupti (`library`, else libcupti.so.13 and the CUDA install paths). Returns nullptr
// after one note when there is none (or no CUPTI headers at build time); the CPU side of the
// profile goes on unchanged. `metrics` (SONDE_GPU_METRICS) are recorded per kernel when not
// empty. `window`: the run's collection window, which holds back records of launches made
// before it opened (it outlives the backend).
std::unique_ptr<GpuBackend> make_cupti_backend(const std::string& library,
                                               const std::vector<std::string>& metrics,
                                               const NoteSink& note, CollectionWindow& window);

}  // namespace sonde
