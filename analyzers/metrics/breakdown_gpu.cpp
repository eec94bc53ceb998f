#include "metrics/breakdown_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sonde::analyzers {
namespace {

// gpu_work's work: NCCL kernels are communication and host-to-device copies t_h2d wherever
// they were launched, as their host calls are (breakdown_roles.cpp: roles "anywhere").
int phase_of_work(const std::string& work, int node_phase) {
  if (work == "nccl") return kComm;
  if (work == "h2d") return kH2d;
  return node_phase;
}

// One gpu_work row launched in the iterations or by an autograd thread.
struct Work {
  std::int64_t process = 0, device = -1, ns = 0;
  std::optional<std::int64_t> start, end;  // none: a kernel without timestamps
  int phase = 0;                           // phase_of_work's, kBackward for an autograd thread's
  bool autograd = false;
  bool nccl = false, compute = false;
};

// Per process: the device time spanned by the work launched in its iterations, from the first
// start to the last end. An autograd thread's work inside it is the iterations' backward.
using Windows = std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>>;

bool inside(const Windows& windows, const Work& w) {
  auto it = windows.find(w.process);
  if (it == windows.end()) return false;
  return !w.start || (*w.start >= it->second.first && *w.start < it->second.second);
}

void add_overlap(const ProfileFile& file, const LoopNodes& loop, const std::vector<Work>& works,
                 Breakdown& b) {
  struct Process {
    std::int64_t pid = 0, iterations = 0;
  };
  std::map<std::int64_t, Process> processes;
  auto st = file.prepare(
      "SELECT t.thread_id, t.process_id, p.pid FROM threads t JOIN processes p "
      "USING (process_id)");
  while (st.step()) {
    Process& p = processes[st.int64(1)];
    p.pid = st.int64(2);
    if (auto it = loop.iterations.find(st.int64(0)); it != loop.iterations.end())
      p.iterations += it->second;
  }
  struct Kernels {
    std::vector<Interval> comm, compute;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, Kernels> devices;  // (process_id, device)
  std::int64_t untimed = 0;
  for (const Work& w : works) {
    if (!w.nccl && !w.compute) continue;
    if (!w.start) {
      ++untimed;
      continue;
    }
    Kernels& k = devices[{w.process, w.device}];
    (w.nccl ? k.comm : k.compute).push_back({*w.start, *w.end});
  }
  for (auto& [key, k] : devices) {
    if (k.comm.empty()) continue;
    const Process& p = processes[key.first];
    b.overlap.push_back(
        {p.pid, key.second, p.iterations, device_overlap(std::move(k.comm), std::move(k.compute))});
  }
  if (untimed > 0)
    b.notes.push_back(fmt::format(
        "gpu: {} kernel(s) launched in the iterations have no timestamps (replayed by "
        "SONDE_GPU_METRICS' range profiler): in the phases by their measured duration, not in "
        "the overlap",
        untimed));
}

}  // namespace

void add_device_time(const ProfileFile& file, const LoopNodes& loop, Breakdown& b) {
  if (!file.has_rows("gpu_activity")) return;
  b.gpu = true;
  std::vector<Work> works;
  Windows windows;
  auto st = file.prepare(
      "SELECT node_id, work, COALESCE(ns, 0), process_id, COALESCE(device, -1), start_ns, "
      "end_ns FROM gpu_work");
  while (st.step()) {
    std::int64_t ns = st.int64(2);
    if (st.is_null(0)) {
      b.gpu_unseen_ns += ns;
      continue;
    }
    auto it = loop.phase.find(st.int64(0));
    if (it == loop.phase.end()) {
      b.gpu_outside_ns += ns;
      continue;
    }
    std::string work = st.text(1);
    Work w;
    w.process = st.int64(3);
    w.device = st.int64(4);
    w.ns = ns;
    if (!st.is_null(5) && !st.is_null(6)) {
      w.start = st.int64(5);
      w.end = st.int64(6);
    }
    w.autograd = it->second == LoopNodes::kAutograd;
    w.phase = phase_of_work(work, w.autograd ? kBackward : it->second);
    w.nccl = work == "nccl";
    w.compute = work == "compute";
    if (!w.autograd && w.start) {
      auto [at, added] = windows.try_emplace(w.process, *w.start, *w.end);
      at->second.first = std::min(at->second.first, *w.start);
      at->second.second = std::max(at->second.second, *w.end);
    }
    works.push_back(w);
  }
  std::int64_t autograd_ns = 0;
  std::erase_if(works, [&](const Work& w) {
    if (w.autograd && !inside(windows, w)) {
      b.gpu_outside_ns += w.ns;
      return true;
    }
    if (w.autograd) autograd_ns += w.ns;
    (w.phase == LoopNodes::kOther ? b.gpu_other_ns : b.rows[w.phase].gpu_ns) += w.ns;
    return false;
  });
  if (autograd_ns > 0)
    b.notes.push_back(fmt::format(
        "gpu: {:.3f} s of device work launched by PyTorch's autograd thread (pt_autograd_N, "
        "which runs backward ops on the GPU) within the iterations' device time is t_b (its "
        "NCCL kernels t_comm)",
        static_cast<double>(autograd_ns) / 1e9));
  add_overlap(file, loop, works, b);
}

}  // namespace sonde::analyzers
