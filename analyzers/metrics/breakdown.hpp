// The iteration breakdown of the Chu deck: t_io, t_h2d, t_f, t_b, t_u, t_comm per training
// iteration. The loop is found from the calling-context tree's structure: the deepest frame
// whose subtree repeats forward, backward and update entries (breakdown_roles.hpp says what an
// entry is); iterations are counted from those entries' calls. Where no such frame exists the
// breakdown says it cannot tell, and why, instead of printing numbers. Where the file has GPU
// activity, each phase also has the device time of the work launched in it (breakdown_gpu.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/breakdown_roles.hpp"
#include "metrics/device_overlap.hpp"
#include "metrics/loaded_profile.hpp"
#include "metrics/metrics.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct BreakdownRow {
  std::string id, title;
  std::int64_t time_ns = 0;
  bool known = true;                  // false: the phase exists but cannot be told (no entry)
  std::vector<std::string> routines;  // that opened this class, by time, largest first
  // Device time of the kernels, copies and memsets launched in this phase (Breakdown::gpu):
  // NCCL kernels are t_comm and host-to-device copies t_h2d wherever they were launched.
  std::int64_t gpu_ns = 0;
};

// Communication against compute on one device of one process, over the kernels launched in the
// iterations (device_overlap.hpp: unions of intervals).
struct GpuOverlapRow {
  std::int64_t pid = 0;
  std::int64_t device = -1;     // -1: a record without one
  std::int64_t iterations = 0;  // the iterations of the process's training threads
  DeviceOverlap time;
};

struct Breakdown {
  bool found = false;  // a training loop was found; otherwise `reason` says why not
  // No thread trains, and the loop found is an evaluation or inference loop: forward entries
  // and data loading only (t_b and t_u not known).
  bool inference = false;
  std::string reason;
  std::vector<BreakdownRow> rows;  // one per class, in phase_classes() order
  std::int64_t other_ns = 0;       // in the loop's iterations, in no phase
  std::int64_t outside_ns = 0;     // the training threads' measured time outside the loop
  std::int64_t unmeasured_ns = 0;  // the training threads' roots' own time
  std::int64_t run_ns = 0;         // the run's wall time (Metrics::run_ns)
  // What shares are taken of: the training threads' time (thread_times.time_s summed), which
  // the rows add up to, so no share passes 100 % however many threads train side by side.
  std::int64_t threads_ns = 0;
  std::int64_t iterations = 0;  // exact, from the loop's entries; 0 when not found
  // In the iterations (evaluations left out): the FLOPs the cost models of the calls beneath
  // counted (BLAS, oneDNN), the small-operators rule's work per iteration; and per routine its
  // calls there (the rule's operator calls are the torch routines'; a candidate whose routine
  // made none ran outside the loop: set-up, an evaluation, teardown).
  double loop_flops = 0;
  std::unordered_map<std::int64_t, std::int64_t> loop_calls;
  // Per routine, its calls on the threads left out (no loop of their own: a loader thread, a
  // helper): a candidate of such a routine ran beside the loop, not outside it.
  std::unordered_map<std::int64_t, std::int64_t> left_out_calls;
  // Where training threads of several ranks are in the file (merged), each rank's iterations:
  // `iterations` sums them (a 2-rank run of 60 lockstep steps read "120 iterations").
  std::map<std::int64_t, std::int64_t> rank_iterations;
  // Per rank (0 where the file has none), the longest training thread's time in its loop's
  // iterations: what sonde scaling compares, set-up and teardown left out.
  std::map<std::int64_t, std::int64_t> rank_loop_ns;
  std::string iterations_from;        // the class whose entries' calls gave the count
  std::string loop;                   // the frame that holds the loop ("<thread>" at top level)
  std::string body;                   // the deepest frame holding forward, backward and update
  std::int64_t threads = 0;           // threads with a training loop
  std::int64_t left_out_threads = 0;  // threads (of every process) without one: not in the rows
  std::int64_t left_out_ns = 0;       // their measured time
  std::vector<std::string> notes;     // what the reader must know to trust the rows
  // Routines of the program's named update that are no update: torch.optim's step runs in
  // their thread (a metrics class's update()); the optimizer-update rule leaves them out.
  std::set<std::int64_t> not_updates;
  // The frames of the program's that call a DataLoader's __iter__ or __next__ in the iterations
  // (the nearest frame of its own above each: the loop's frame, a feeder's generator, a
  // next_batch()): the loaders the loop reads, whose workers are the data-loading rule's.
  std::set<std::string> loader_callers;
  // The file has GPU activity: the rows' gpu_ns and these are filled, summing to every
  // gpu_activity row's device time.
  bool gpu = false;
  std::int64_t gpu_other_ns = 0;       // launched in the iterations, in no phase
  std::int64_t gpu_outside_ns = 0;     // launched outside the iterations (or threads with no loop)
  std::int64_t gpu_unseen_ns = 0;      // launched by a call sonde did not see (node_id NULL)
  std::vector<GpuOverlapRow> overlap;  // the devices that ran NCCL kernels in the iterations
};

Breakdown compute_breakdown(const ProfileFile& file, const std::vector<PhaseMapping>& mappings);
Breakdown compute_breakdown(LoadedProfile& profile, const std::vector<PhaseMapping>& mappings);

}  // namespace sonde::analyzers
