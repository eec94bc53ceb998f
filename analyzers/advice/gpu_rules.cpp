#include "advice/gpu_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "advice/rule_helpers.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

std::vector<Candidate> gpu_copies(const AdviceInput& in, const Rule& rule) {
  const GpuSummary& g = in.gpu;
  std::int64_t run = in.metrics.share_base_ns();
  // The CPU side says how long the program waited for its copies; without a CUDA API profile
  // the device's copy time is the next best figure.
  bool api = g.copies.calls > 0;
  std::int64_t ns = api ? g.copies.time_ns : g.copy_ns;
  double bytes = api ? g.copies.bytes : g.copy_bytes;
  if (ns <= 0 || share(ns, run) < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "host<->device copies";
  double gbs = bytes / static_cast<double>(ns);  // bytes per ns = GB/s
  c.evidence = {{"copy_time_s", seconds(ns)},
                {"pct_run", share(ns, run)},
                {"bytes", bytes},
                {"gb_per_s", gbs},
                {"measured_on", api ? "CPU (CUDA API calls)" : "GPU (memcpy activity)"}};
  if (api) c.evidence.emplace_back("calls", g.copies.calls);
  c.summary = fmt::format(
      "host<->device copies take {:.1f} % of the busy threads' time outside set-up ({:.3f} s, "
      "{:.3g} MB at "
      "{:.2f} GB/s)",
      share(ns, run), seconds(ns), bytes / 1e6, gbs);
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.5 * seconds(ns);
  return {c};
}

std::vector<Candidate> gpu_syncs(const AdviceInput& in, const Rule& rule) {
  const ApiTotals& s = in.gpu.syncs;
  std::int64_t run = in.metrics.share_base_ns();
  if (s.time_ns <= 0 || share(s.time_ns, run) < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "CUDA synchronisation";
  c.evidence = {{"sync_time_s", seconds(s.time_ns)},
                {"pct_run", share(s.time_ns, run)},
                {"calls", s.calls},
                {"avg_ms", static_cast<double>(s.time_ns) / 1e6 / static_cast<double>(s.calls)}};
  c.summary = fmt::format(
      "the host waits in CUDA synchronisation for {:.1f} % of the busy threads' time outside "
      "set-up "
      "({:.3f} s over {} calls)",
      share(s.time_ns, run), seconds(s.time_ns), s.calls);
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.5 * seconds(s.time_ns);
  return {c};
}

std::vector<Candidate> gpu_launches(const AdviceInput& in, const Rule& rule) {
  const GpuSummary& g = in.gpu;
  const ApiTotals& l = g.launches;
  std::int64_t run = in.metrics.share_base_ns();
  if (l.time_ns <= 0 || share(l.time_ns, run) < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "kernel launches";
  double launch_us = static_cast<double>(l.time_ns) / 1e3 / static_cast<double>(l.calls);
  c.evidence = {{"launches", l.calls},
                {"launch_time_s", seconds(l.time_ns)},
                {"pct_run", share(l.time_ns, run)},
                {"avg_launch_us", launch_us}};
  std::string kernels;
  std::int64_t kernel_calls = 0;
  for (const GpuKernel& k : g.kernels) kernel_calls += k.calls;
  if (kernel_calls > 0) {
    double kernel_us = static_cast<double>(g.kernel_ns) / 1e3 / static_cast<double>(kernel_calls);
    c.evidence.emplace_back("avg_kernel_us", kernel_us);
    kernels = fmt::format("; kernels run {:.1f} us on average", kernel_us);
  }
  c.summary = fmt::format(
      "{} kernel launches cost the host {:.3f} s ({:.1f} % of the busy threads' time outside "
      "set-up, "
      "{:.1f} us each){}",
      l.calls, seconds(l.time_ns), share(l.time_ns, run), launch_us, kernels);
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.5 * seconds(l.time_ns);
  return {c};
}

std::vector<Candidate> gpu_kernels(const AdviceInput& in, const Rule& rule) {
  const GpuSummary& g = in.gpu;
  std::vector<Candidate> out;
  for (const GpuKernel* kp : rank_kernels_as_tau(g.kernels)) {
    const GpuKernel& k = *kp;
    double pct = share(k.time_ns, g.kernel_ns);
    if (pct < rule.threshold) continue;
    double time_s = seconds(k.time_ns);
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = k.name;
    c.evidence = {{"time_s", time_s},
                  {"pct_gpu_kernel_time", pct},
                  {"calls", k.calls},
                  {"avg_us", static_cast<double>(k.time_ns) / 1e3 / static_cast<double>(k.calls)},
                  {"grid_threads", k.grid},
                  {"block_threads", k.block},
                  {"launch_configs", k.launch_configs},
                  {"registers", k.registers}};
    std::string measured;
    if (k.metric_launches > 0) c.evidence.emplace_back("metric_launches", k.metric_launches);
    if (k.warps_per_inst) {
      c.evidence.emplace_back("warps_per_inst", *k.warps_per_inst);
      c.evidence.emplace_back("warps_per_inst_x_time_s", *k.warps_per_inst * time_s);
      measured += fmt::format("; {:.3g} warps per instruction", *k.warps_per_inst);
    }
    if (k.gld_per_inst) {
      c.evidence.emplace_back("gld_per_inst", *k.gld_per_inst);
      c.evidence.emplace_back("gld_per_inst_x_time_s", *k.gld_per_inst * time_s);
      measured += fmt::format(", {:.3g} global loads per instruction", *k.gld_per_inst);
    }
    // The nearer speed-of-light limit says how much headroom the kernel has.
    std::optional<double> sol;
    if (k.sm_pct) {
      c.evidence.emplace_back("sm_pct_peak", *k.sm_pct);
      sol = *k.sm_pct;
    }
    if (k.memory_pct) {
      c.evidence.emplace_back("memory_pct_peak", *k.memory_pct);
      sol = std::max(sol.value_or(0), *k.memory_pct);
    }
    if (sol) measured += fmt::format("; at {:.0f} % of its nearer throughput peak", *sol);
    c.summary = fmt::format(
        "kernel {} takes {:.1f} % of the GPU's kernel time ({:.3f} s over {} "
        "launches){}",
        k.name, pct, time_s, k.calls, measured);
    c.advice = fill(rule.advice, k.name);
    c.est_gain_s = sol ? 0.5 * time_s * std::max(0.0, 1.0 - *sol / 100.0) : 0;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace sonde::analyzers
