// The CUPTI backend: callbacks on the CUDA runtime and driver APIs measure those calls as
// routines of the calling thread's call path, and remember which call path each launch, copy
// or memset came from (by CUPTI correlation id); the activity API delivers what the GPU then
// did, which the flush ties back to those call paths.
#pragma once

#include <cupti.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/cupti_layouts.hpp"
#include "gpu/cupti_library.hpp"
#include "gpu/cupti_metrics.hpp"
#include "gpu/gpu_backend.hpp"
#include "sonde/probe.hpp"

namespace sonde {

class CuptiBackend final : public GpuBackend {
 public:
  // `version`: the loaded CUPTI's cuptiGetVersion; it chooses how records are read and how
  // many callback ids there are.
  // `window`: the run's collection window (it outlives the backend).
  CuptiBackend(CuptiLibrary lib, std::vector<std::string> metrics, NoteSink note, uint32_t version,
               CollectionWindow& window);

  bool start() override;
  bool api_traced() const override { return traced_.load(std::memory_order_acquire); }
  void collect(std::vector<GpuRow>& out, bool final, const Clock& clock) override;
  void requeue(std::vector<GpuRow>&& rows) override;
  void thread_gone(const ThreadState* thread, const HugeVector<int64_t>& node_ids) override;
  void fork_child() override;
  void info(std::vector<std::pair<std::string, std::string>>& out) const override;

  // CUPTI's callbacks land here (cupti_callbacks.cpp, cupti_activity.cpp).
  void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
  void on_context_created(CUcontext context) {
    if (metrics_ && !forked_.load(std::memory_order_relaxed)) metrics_->context_created(context);
  }
  void on_context_destroyed(CUcontext context);
  // CUPTI's CUDA graph resource callbacks (cupti_graphs.cpp): a node created, cloned or about
  // to be destroyed, a graph or executable graph about to be destroyed.
  void on_graph(CUpti_CallbackId cbid, const CUpti_GraphData* data);
  // Another CUPTI client (cupti_guard.cpp) is about to register its buffer callbacks, or has
  // disabled a kind sonde uses; `who` names its library.
  void other_client_registers(const std::string& who);
  void other_client_disables(const std::string& who, const char* kind);
  // Another client's subscription was refused while sonde holds CUPTI's one subscriber:
  // sonde unsubscribes (after taking its records) and says so. False: sonde held none.
  // `process_wide`: it subscribed with cuptiSubscribe, as clients of the process-wide
  // activity calls do.
  bool other_client_subscribes(const std::string& who, bool process_wide);
  // Another client unsubscribed, or finalized CUPTI (`finalized`: which detached sonde too),
  // and its call has returned: if it had taken sonde's subscription or buffers, sonde takes
  // them back, on a thread of its own, and says which window of GPU records it lacks. The
  // client flushed its own records before (Kineto stops with disable, flush, then
  // unsubscribe or finalize).
  void other_client_leaves(const std::string& who, bool finalized);
  // Another client is about to finalize CUPTI: sonde's records so far are taken first.
  void other_client_finalizes();
  void on_buffer_request(uint8_t** buffer, size_t* size, size_t* max_records);
  void on_buffer_complete(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                          size_t valid);
  // The activity model of sonde's subscription, for the note and run_info.
  bool per_subscriber() const { return per_subscriber_.load(std::memory_order_acquire); }

 private:
  CollectionWindow& window_;
  // What sonde knows about one API callback id, worked out on its first call.
  struct ApiInfo {
    std::atomic<bool> ready{false};
    bool activity = false;     // launches, copies, memsets: GPU records will follow
    bool kernel = false;       // a kernel launch (metrics are taken around it)
    bool graph = false;        // a graph launch: many records, one correlation id
    bool cooperative = false;  // a cooperative launch (its blocks wait for each other)
    int launch_config = 0;     // 1: cudaLaunchKernelExC, 2: cuLaunchKernelEx
    int capture = 0;           // +1 begins a stream capture, -1 ends one
    bool clones = false;       // copies graph nodes (instantiate, clone): no new origin
    int kind_offset = -1;      // cudaMemcpyKind in the parameters (runtime copies)
    int count_offset = -1;     // byte count in the parameters
    std::atomic<RoutineId> routine[6] = {};  // per copy direction (0-4), 5: none
    std::string name;
  };
  // The call path a correlation id was launched from.
  struct Origin {
    const ThreadState* thread = nullptr;
    uint32_t node = 0;
    int64_t node_id = 0;
    uint32_t generation = 0;  // collect() count when it was launched
    uint32_t seen = 0;        // collect() count when its last record arrived, 0: none yet
    bool graph = false;       // records keep coming (a graph's kernels) until its lifetime ends
    MetricValues metrics;     // the kernel's, known at the launch's exit
    // Its metrics are decoded at the launch's exit; a record that arrives before (the kernel
    // ran inside the launch, under kernel replay) waits for them.
    bool awaiting_metrics = false;
    bool before_window = false;  // launched while the collection window was closed
  };
  // A finished activity as CUPTI delivered it (times in CUPTI's clock).
  struct Record {
    uint8_t kind = 0;  // 0 kernel, 1 memcpy, 2 memset
    uint8_t copy_kind = 0;
    uint32_t correlation = 0;
    uint32_t name = 0;        // index into names_ (kernels)
    uint64_t graph_node = 0;  // CUPTI's id of the graph node that ran it, 0: not a graph's
    uint32_t device = 0, stream = 0;
    uint64_t start = 0, end = 0, bytes = 0;
    int32_t grid[3] = {}, block[3] = {};
    int32_t registers = 0, shared_bytes = 0;
  };

  // The call path a CUDA graph node was created in, kept by CUPTI's node id: a kernel, copy or
  // memset a graph runs carries that id (graphNodeId), which leads back here.
  struct NodeOrigin {
    const ThreadState* thread = nullptr;
    uint32_t node = 0;
    int64_t node_id = 0;
    uint32_t graph = 0;  // CUPTI's id of the graph or executable graph holding the node
    uint32_t gone = 0;   // collect() count when the node or its graph was destroyed, 0: alive
  };

  void start_metrics();
  // True while this thread is inside an API call that copies graph nodes (cudaGraphInstantiate,
  // cudaGraphClone): the nodes it creates come from others, whose origin they take.
  static bool cloning_now();
  // The origin of a new node: the calling thread's innermost open frame.
  bool current_origin(NodeOrigin& o) const;
  uint64_t graph_node_id(CUgraphNode node) const;
  // Marks the nodes of graph `graph` gone (under origins_mu_).
  void graph_gone(uint32_t graph);
  // Ties `row` to the origin of its graph node (under origins_mu_).
  void attach_graph_origin(GpuRow& row, uint64_t graph_node);
  ApiInfo& api_info(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
  RoutineId routine_of(ApiInfo& info, CUpti_CallbackDomain domain, int direction);
  void remember_origin(uint32_t correlation, bool awaiting_metrics, bool graph, bool before_window);
  // Why this launch is not profiled (skip_none when it may be).
  int metrics_skip(const ApiInfo& info, const CUpti_CallbackData* data) const;
  void track_capture(const ApiInfo& info, const CUpti_CallbackData* data);
  void attach_metrics(uint32_t exiting, std::vector<std::pair<uint32_t, MetricValues>>& measured);
  void parse_buffer(uint8_t* buffer, size_t valid);
  bool enable_activity_kinds();
  // cuptiSubscribe(_v2) for sonde; `holder` receives the name of one that refuses it.
  CUptiResult subscribe(char* holder, uint32_t holder_size);
  // Subscribes again and enables the callback domains, after another client let CUPTI go.
  bool subscribe_again();
  // Flushes sonde's records so far, unsubscribes and says why: another client needs CUPTI in a
  // way sonde's subscription would refuse it. False when sonde held no subscription.
  bool give_up(const std::string& note);
  void take_back(const std::string& who, bool finalized);
  GpuRow to_row(const Record& r, int64_t offset);
  // The forced flush at exit: unsubscribes first, and gives up after a bounded wait.
  void final_flush();

  CuptiLibrary lib_;
  std::vector<std::string> metric_names_;  // SONDE_GPU_METRICS, expanded
  NoteSink note_;
  std::unique_ptr<KernelMetrics> metrics_;  // set by start() when metrics are asked for
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::atomic<bool> traced_{false};
  std::atomic<bool> activity_{false};  // activity records enabled
  std::atomic<bool> forked_{false};
  // Another client took the activity buffers: sonde no longer flushes CUPTI or expects records.
  std::atomic<bool> ceded_{false};
  // sonde unsubscribed so that another client could subscribe (CUPTI before 13.2).
  std::atomic<bool> gave_up_{false};
  // sonde's subscription has activity records of its own (CUDA 13.3's subscriber-scope calls):
  // another subscriber that uses them too gets its records beside sonde's.
  std::atomic<bool> per_subscriber_{false};
  // Another client used CUPTI's process-wide activity calls (Kineto does), which CUPTI refuses
  // next to the subscriber-scope ones: sonde uses the process-wide calls from then on.
  std::atomic<bool> process_wide_client_{false};
  // When sonde's GPU records became another client's (CLOCK_REALTIME ns, 0: they are not).
  std::atomic<int64_t> ceded_at_{0};
  // One taking back at a time (an unsubscribe and then a finalize each start one).
  std::mutex taking_back_mu_;
  // The exit's last flush has begun: CUPTI is not taken back after it.
  std::atomic<bool> closing_{false};
  // Stream captures under way in the process (cudaStreamBeginCapture to EndCapture): a capture
  // in global mode is invalidated by a synchronising call from any thread, which the range
  // profiler makes, so no launch is profiled while one is open.
  std::atomic<int> captures_{0};
  // The last forced flush was made (at exit, before the CUDA runtime's teardown where the order
  // allows): later flushes take what CUPTI delivered since, without calling into it again.
  bool flushed_final_ = false;  // flushing thread only

  uint32_t version_ = 0;
  const RecordLayout* layout_ = nullptr;  // nullptr: a CUPTI whose records sonde cannot read
  std::mutex info_mu_;                    // first call of a callback id only
  // One entry per callback id of the loaded CUPTI (its CUPTI_*_TRACE_CBID_SIZE).
  std::vector<ApiInfo> runtime_info_, driver_info_;
  // Callbacks whose id lies beyond those tables (a CUPTI newer than sonde knows): not measured,
  // counted, and the first one named in a note.
  std::atomic<uint64_t> beyond_table_{0};
  std::atomic<uint32_t> first_beyond_{0};

  // Taken by the API callback of every launch; never held while calling into CUPTI.
  std::mutex origins_mu_;
  std::unordered_map<uint32_t, Origin> origins_;
  uint32_t generation_ = 0;
  // Graph node id -> origin, under origins_mu_; bounded, and a destroyed node's entry leaves
  // once its records have had time to come (the origin lifetime).
  std::unordered_map<uint64_t, NodeOrigin> graph_nodes_;

  // Taken by the buffer-completion callback, which CUPTI may run on its own thread or inside
  // cuptiActivityFlushAll: collect() flushes first and takes the lock afterwards.
  std::mutex records_mu_;
  std::vector<Record> records_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_index_;

  std::vector<GpuRow> retry_;  // flushing thread only
  std::vector<Record> held_;   // flushing thread only: kernel records awaiting their metrics

  std::atomic<uint64_t> delivered_{0}, cupti_dropped_{0}, no_buffer_{0}, unattributed_{0},
      incomplete_{0}, origins_full_{0}, contexts_flushed_{0}, before_window_{0}, untimed_{0};
  // Records a graph ran (graphNodeId set), those whose node's origin is unknown, and nodes not
  // kept because the table was full.
  std::atomic<uint64_t> graph_records_{0}, graph_unknown_{0}, graph_nodes_full_{0};
};

// Arms cupti_guard.cpp's interposers for `backend` (nullptr: disarms them).
void guard_cupti(CuptiBackend* backend);
// Another client registered activity buffers before sonde started (cupti_guard.cpp): its name.
void note_registered_before(const std::string& who);
bool registered_before(std::string& who);

}  // namespace sonde
