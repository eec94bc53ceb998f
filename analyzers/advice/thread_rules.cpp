#include "advice/thread_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "advice/rule_helpers.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

// ---- blas-threads -----------------------------------------------------------------------

struct GemmTotals {
  std::int64_t time_ns = 0;
  double flops = 0;
  std::string dtype;
  std::string top_routine;
};

GemmTotals gemm_totals(const Metrics& m) {
  GemmTotals g;
  std::int64_t top = -1;
  for (const auto& r : m.routines) {
    if ((r.kind != "blas" && r.kind != "onednn") || r.flops <= 0) continue;
    g.time_ns += r.incl_ns;
    g.flops += r.flops;
    if (r.incl_ns > top) {
      top = r.incl_ns;
      g.dtype = r.dtype;
      g.top_routine = r.name;
    }
  }
  return g;
}

// Work that ran on `threads` of `cores`: what all of them would save at best (linear scaling),
// held to the work's FLOPs at the calibrated peak for every core.
void more_threads_gain(Candidate& c, const Metrics& m, const GemmTotals& g, std::int64_t threads,
                       std::int64_t cores) {
  c.est_gain_s = seconds(g.time_ns) *
                 (1.0 - static_cast<double>(threads) / static_cast<double>(cores));
  if (auto peak = g.dtype.empty() ? std::nullopt : m.facts.peak_at("gemm." + g.dtype, cores)) {
    bound_gain(c, seconds(g.time_ns), g.flops / (*peak * 1e9),
               fmt::format("{:.3g} GFLOP at the calibrated gemm.{} peak for {} threads ({:.3g} "
                           "GFLOP/s)", g.flops / 1e9, g.dtype, cores, *peak));
  } else {
    c.gain_bound = "not bounded by a peak: none calibrated for this work on all cores "
                   "(sonde calibrate)";
  }
}

}  // namespace

std::vector<Candidate> blas_threads(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto threads = m.facts.blas_threads;
  auto cores = m.facts.available_cores();
  if (!threads || !cores || *threads >= *cores) return {};
  GemmTotals g = gemm_totals(m);
  double pct = share(g.time_ns, m.share_base_ns());
  if (g.time_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = m.facts.blas_library ? "BLAS (" + *m.facts.blas_library + ")" : "BLAS";
  double gflops = g.flops / static_cast<double>(g.time_ns);
  c.evidence = {{"blas_threads", *threads},     {"cores", *cores},
                {"gemm_time_s", seconds(g.time_ns)}, {"gemm_pct_run", pct},
                {"gemm_gflops", gflops}};
  std::string peak_text;
  if (!g.dtype.empty()) {
    // Against the peak for every available core (what the machine could do), not the peak for
    // the threads the BLAS ran (gemm_shapes' pct_peak): a figure of its own, named so.
    if (auto peak = m.facts.peak_at("gemm." + g.dtype, *cores)) {
      double p = 100.0 * gflops / *peak;
      c.evidence.emplace_back("pct_peak_all_cores", p);
      peak_text = fmt::format(" ({:.1f} % of the {}-thread peak)", p, *cores);
    }
  }
  c.summary = fmt::format("BLAS runs {} thread{} of {} available; GEMMs reach {:.2f} GFLOP/s{} "
                          "and take {:.1f} % of the run ({:.3f} s)",
                          *threads, *threads == 1 ? "" : "s", *cores, gflops, peak_text, pct,
                          seconds(g.time_ns));
  c.advice = fill(rule.advice, fmt::format("{}", *cores));
  more_threads_gain(c, m, g, *threads, *cores);
  return {c};
}

// ---- framework-threads ------------------------------------------------------------------

// torch runs oneDNN on its own intra-op pool, torch.get_num_threads() wide (run_info
// torch.num_threads, read by the Python hook): a program that lowers it (torch.set_num_threads,
// OMP_NUM_THREADS) leaves cores idle that no BLAS setting gives back. The work counted is the
// oneDNN shapes that ran on fewer threads than the cores, as gemm_shapes recorded them; BLAS
// calls have their own count and rule (blas-threads).
std::vector<Candidate> framework_threads(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto it = m.facts.info.find("torch.num_threads");
  auto cores = m.facts.available_cores();
  if (it == m.facts.info.end() || !cores) return {};
  std::int64_t threads = std::atoll(it->second.c_str());
  if (threads <= 0 || threads >= *cores) return {};
  std::map<std::int64_t, const RoutineMetrics*> routine;
  for (const auto& r : m.routines) routine.emplace(r.routine_id, &r);
  GemmTotals g;
  std::map<std::string, double> dtype_time;
  for (const auto& s : m.shapes) {
    auto r = routine.find(s.routine_id);
    if (r == routine.end() || r->second->kind != "onednn" || !s.threads || *s.threads >= *cores)
      continue;
    g.time_ns += s.time_ns;
    g.flops += s.flops;
    dtype_time[s.dtype] += static_cast<double>(s.time_ns);
  }
  double pct = share(g.time_ns, m.share_base_ns());
  if (g.time_ns <= 0 || pct < rule.threshold) return {};
  g.dtype = std::max_element(dtype_time.begin(), dtype_time.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; })
                ->first;
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "torch intra-op threads";
  c.evidence = {{"torch_threads", threads},
                {"cores", *cores},
                {"onednn_time_s", seconds(g.time_ns)},
                {"onednn_pct_run", pct},
                {"onednn_gflops", g.flops / static_cast<double>(g.time_ns)}};
  c.summary = fmt::format(
      "torch runs {} intra-op thread{} of {} available; its oneDNN calls on them take {:.1f} % "
      "of the run ({:.3f} s)",
      threads, threads == 1 ? "" : "s", *cores, pct, seconds(g.time_ns));
  c.advice = fill(rule.advice, fmt::format("{}", *cores));
  more_threads_gain(c, m, g, threads, *cores);
  return {c};
}

}  // namespace sonde::analyzers
