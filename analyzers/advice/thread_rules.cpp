#include "advice/thread_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "advice/rule_helpers.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

// ---- blas-threads -----------------------------------------------------------------------

struct GemmTotals {
  std::int64_t time_ns = 0;
  double flops = 0;
  std::map<std::string, double> flops_by_dtype;  // each type's FLOPs go at its own peak
};

// The BLAS's own work, which blas.threads sizes. oneDNN's runs on torch's intra-op pool
// (framework-threads): counted here, a conv net on every core was told to raise
// OPENBLAS_NUM_THREADS.
GemmTotals blas_totals(const Metrics& m) {
  GemmTotals g;
  for (const auto& r : m.routines) {
    if (r.kind != kinds::kBlas || r.flops <= 0) continue;
    g.time_ns += r.incl_ns;
    g.flops += r.flops;
    g.flops_by_dtype[r.dtype] += r.flops;
  }
  return g;
}

// The least time the work takes at the calibrated peaks for `cores` threads, each type's FLOPs
// at its own type's peak, and those peaks in words; none where a type has no peak. One peak for
// all (the type with the most time) put a run's f32 and f64 GEMMs at 115 % of it.
std::optional<std::pair<double, std::string>> floor_at_peaks(const Metrics& m, const GemmTotals& g,
                                                             std::int64_t cores) {
  double floor_s = 0;
  std::string peaks;
  for (const auto& [dtype, flops] : g.flops_by_dtype) {
    auto peak = dtype.empty() ? std::nullopt : m.facts.peak_at("gemm." + dtype, cores);
    if (!peak) return std::nullopt;
    floor_s += flops / (*peak * 1e9);
    peaks += fmt::format("{}gemm.{} {:.3g} GFLOP/s", peaks.empty() ? "" : ", ", dtype, *peak);
  }
  if (peaks.empty()) return std::nullopt;
  return std::pair{floor_s, peaks};
}

// Work that ran on `threads` of `cores`: what all of them would save at best (linear scaling),
// held to the work's FLOPs at the calibrated peaks for every core.
void more_threads_gain(Candidate& c, const Metrics& m, const GemmTotals& g, std::int64_t threads,
                       std::int64_t cores) {
  c.est_gain_s =
      seconds(g.time_ns) * (1.0 - static_cast<double>(threads) / static_cast<double>(cores));
  if (auto floor = floor_at_peaks(m, g, cores)) {
    bound_gain(c, seconds(g.time_ns), floor->first,
               fmt::format("{:.3g} GFLOP at the {} peaks for {} threads ({})", g.flops / 1e9,
                           m.facts.peak_word({"gemm.f64", "gemm.f32"}), cores, floor->second));
  } else {
    c.gain_bound =
        "not bounded by a peak: none calibrated for this work on all cores "
        "(sonde calibrate)";
  }
}

// The thread rules count one rank's share of its host's cores (cores_per_rank): the BLAS of 2
// ranks on 2 cores told to use both oversubscribes them. Said, with the evidence, where ranks
// share a host.
void say_ranks(Candidate& c, const Metrics& m) {
  if (m.facts.ranks_on_host <= 1) return;
  auto cores = m.facts.available_cores();
  c.evidence.emplace_back("ranks_on_host", m.facts.ranks_on_host);
  c.evidence.emplace_back("host_cores", *cores);
  std::string share = fmt::format(" ({} is one rank's share: {} ranks run on a host of {} cores)",
                                  *m.facts.cores_per_rank(), m.facts.ranks_on_host, *cores);
  c.summary += share;
  c.advice += share;
}

}  // namespace

std::optional<std::int64_t> cores_beside_workers(const AdviceInput& in) {
  auto cores = in.metrics.facts.cores_per_rank();
  const LoaderWorkers& w = in.loader;
  if (!cores || w.fetch_ns <= 0 || w.life_ns <= 0 || w.at_once <= 0) return std::nullopt;
  // The workers alive together, each busy the share of its life its fetches took (against the
  // whole run's wall time, a red-team worker busy 82 % of its life read 33 %: imports first).
  double busy = static_cast<double>(w.at_once) *
                std::min(1.0, static_cast<double>(w.fetch_ns) / static_cast<double>(w.life_ns));
  return std::max<std::int64_t>(1, *cores - std::llround(busy));
}

namespace {

// More BLAS threads than the cores the busy DataLoader workers leave: a red-team run with one
// worker spinning in __getitem__ on 2 cores ran its GEMMs 9 times slower with OpenBLAS's 2
// threads than with 1 (its 512x32x512 shape at 3.1 GFLOP/s against 67.6), and sonde named the
// shape, "skinny", and no thread count.
std::vector<Candidate> blas_beside_workers(const AdviceInput& in, const Rule& rule,
                                           std::int64_t threads, std::int64_t free) {
  const Metrics& m = in.metrics;
  GemmTotals g = blas_totals(m);
  double pct = share(g.time_ns, m.share_base_ns());
  if (g.time_ns <= 0 || pct < rule.threshold) return {};
  std::int64_t cores = *m.facts.cores_per_rank();
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = m.facts.blas_library ? "BLAS (" + *m.facts.blas_library + ")" : "BLAS";
  c.evidence = {{"blas_threads", threads},           {"cores", cores},
                {"cores_beside_workers", free},      {"loader_workers", in.loader.at_once},
                {"gemm_time_s", seconds(g.time_ns)}, {"gemm_pct_run", pct}};
  c.summary = fmt::format(
      "BLAS runs {} threads on {} cores beside {} DataLoader worker{} busy fetching, which leave "
      "it {}; its GEMMs take {:.1f} % of the busy threads' time outside set-up ({:.3f} s)",
      threads, cores, in.loader.at_once, in.loader.at_once == 1 ? "" : "s", free, pct,
      seconds(g.time_ns));
  c.advice = fmt::format(
      "give the BLAS the {} core{} the workers leave: OPENBLAS_NUM_THREADS={} (MKL_NUM_THREADS, "
      "OMP_NUM_THREADS for others); a BLAS thread that shares its core with a busy worker makes "
      "each GEMM's other threads wait for it",
      free, free == 1 ? "" : "s", free);
  // The threads past the free cores' share of the work, at least: a GEMM waits for its slowest
  // thread, and measured it cost far more (9x above).
  c.est_gain_s =
      seconds(g.time_ns) * (1.0 - static_cast<double>(free) / static_cast<double>(threads));
  c.gain_bound =
      "a lower bound: the oversubscribed threads' share of the GEMMs' time; their waits at each "
      "GEMM's end cost more (a red-team run: 9x)";
  say_ranks(c, m);
  return {c};
}

struct OthersLoad {
  double cores = 0;       // other programs' load, in cores
  bool measured = false;  // over the run (else the load average at its end, less the run's own)
};

// The other programs' load where it is believed. Measured, half a core of others counts (a
// thread of 2 preempted half the time holds every parallel region of the other up); the load
// average's lag, a minute of whatever ran before, needs a whole core to be believed (the
// red-team CNN's read 3.0 beside one busy loop).
std::optional<OthersLoad> believed_others(const AdviceInput& in) {
  if (in.others_load) {
    if (*in.others_load < 0.5) return std::nullopt;
    return OthersLoad{*in.others_load, true};
  }
  if (!in.host_load || !in.own_load || *in.host_load - *in.own_load < 1.0) return std::nullopt;
  return OthersLoad{*in.host_load - *in.own_load, false};
}

// More threads pay on cores that are free. Where the host was busy with other programs over
// the run (measured: its busy CPU time less the run's own over the run's life, half a core or
// more; else the load average at the end less the run's own threads' share, a core), it is said
// beside the advice with the figures, and the estimate held to the cores the others left: a
// red-team run at load 5-7 on 2 cores, one thread getting half a CPU, was told to double its
// BLAS and torch threads and ran 3 to 30 times slower so; another, beside one busy loop on 2
// cores, was told torch.set_num_threads(2) would gain 2.3 s, its first candidate, and ran 3.5
// to 5 times slower. sonde tune measures both under the same load.
void busy_host(Candidate& c, const AdviceInput& in, std::int64_t threads, std::int64_t cores,
               double work_s) {
  std::optional<OthersLoad> believed = believed_others(in);
  if (!believed) return;
  double others = believed->cores;
  if (in.host_load) c.evidence.emplace_back("host_load", *in.host_load);
  c.evidence.emplace_back("others_load", others);
  double left = static_cast<double>(cores) - others;
  c.evidence.emplace_back("cores_left_by_others", std::max(0.0, left));
  std::string load = believed->measured ? fmt::format(
                                              "other programs kept about {:.1f} of its {} cores "
                                              "busy over the run",
                                              others, cores)
                                        : fmt::format(
                                              "load average {:.1f} on {} cores as the run ended, "
                                              "about {:.1f} of it other programs",
                                              *in.host_load, cores, others);
  c.advice += fmt::format(
      "; but the host was busy ({}): threads added there compete with them and can run slower "
      "than now; measure before keeping it (sonde tune)",
      load);
  if (left < static_cast<double>(threads) + 1) {
    c.est_gain_s = 0;
    c.gain_bound = fmt::format(
        "none while that load lasts: the {:.1f} cores the other programs left hold no thread "
        "more than the {} it runs",
        std::max(0.0, left), threads);
  } else if (double held = work_s * (1.0 - static_cast<double>(threads) / left);
             held < c.est_gain_s) {
    c.est_gain_s = held;
    c.gain_bound = fmt::format(
        "the work's {} threads against the {:.1f} cores the other "
        "programs left",
        threads, left);
  }
}

}  // namespace

std::vector<Candidate> blas_threads(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto threads = m.facts.blas_threads;
  auto cores = m.facts.cores_per_rank();
  if (!threads || !cores) return {};
  if (auto free = cores_beside_workers(in); free && *threads > *free)
    return blas_beside_workers(in, rule, *threads, *free);
  if (*threads >= *cores) return {};
  // The program's own threads calling the BLAS side by side (a ThreadPool of GEMMs) hold the
  // cores already: a red team's two pool threads on 2 cores were told to give the BLAS 2
  // threads each, and ran slower so in 7 of 7 pairs (0.846 -> 1.037 s).
  if (in.blas_calling_threads > 1 && *threads * in.blas_calling_threads >= *cores) return {};
  GemmTotals g = blas_totals(m);
  double pct = share(g.time_ns, m.share_base_ns());
  if (g.time_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = m.facts.blas_library ? "BLAS (" + *m.facts.blas_library + ")" : "BLAS";
  double gflops = g.flops / static_cast<double>(g.time_ns);
  c.evidence = {{"blas_threads", *threads},
                {"cores", *cores},
                {"gemm_time_s", seconds(g.time_ns)},
                {"gemm_pct_run", pct},
                {"gemm_gflops", gflops}};
  std::string peak_text;
  // Against the peaks for every available core (what the machine could do), not the peak for
  // the threads the BLAS ran (gemm_shapes' pct_peak): a figure of its own, named so. With more
  // than one type, the time at their peaks over the time taken.
  if (auto floor = floor_at_peaks(m, g, *cores)) {
    double p = 100.0 * floor->first / seconds(g.time_ns);
    c.evidence.emplace_back("pct_peak_all_cores", p);
    peak_text = fmt::format(" ({:.1f} % of the {}-thread peak{})", p, *cores,
                            g.flops_by_dtype.size() > 1 ? "s" : "");
  }
  c.summary = fmt::format(
      "BLAS runs {} thread{} of {} available; GEMMs reach {:.2f} GFLOP/s{} "
      "and take {:.1f} % of the busy threads' time outside set-up ({:.3f} s)",
      *threads, *threads == 1 ? "" : "s", *cores, gflops, peak_text, pct, seconds(g.time_ns));
  c.advice = fill(rule.advice, fmt::format("{}", *cores));
  say_ranks(c, m);
  more_threads_gain(c, m, g, *threads, *cores);
  busy_host(c, in, *threads, *cores, seconds(g.time_ns));
  return {c};
}

// ---- framework-threads ------------------------------------------------------------------

// torch runs oneDNN on its own intra-op pool, torch.get_num_threads() wide (run_info
// torch.num_threads, read by the Python hook): a program that lowers it (torch.set_num_threads,
// OMP_NUM_THREADS) leaves cores idle that no BLAS setting gives back. The work counted is the
// oneDNN shapes that ran on fewer threads than the cores, as gemm_shapes recorded them; BLAS
// calls have their own count and rule (blas-threads).
//
// DataLoader workers alive beside the loop take cores of their own: a red-team CNN with 2
// workers on 2 cores, torch at 1 thread, was told torch.set_num_threads(2) would gain 0.60 s,
// and ran 3 to 8 times slower so. The cores the pool may have are those the workers leave.
std::vector<Candidate> framework_threads(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto it = m.facts.info.find("torch.num_threads");
  auto host_cores = m.facts.cores_per_rank();
  if (it == m.facts.info.end() || !host_cores) return {};
  std::int64_t threads = std::atoll(it->second.c_str());
  std::int64_t cores = cores_beside_workers(in).value_or(*host_cores);
  std::int64_t workers = *host_cores - cores;
  if (threads <= 0 || threads >= cores) return {};
  std::map<std::int64_t, const RoutineMetrics*> routine;
  for (const auto& r : m.routines) routine.emplace(r.routine_id, &r);
  GemmTotals g;
  for (const auto& s : m.shapes) {
    auto r = routine.find(s.routine_id);
    if (r == routine.end() || r->second->kind != kinds::kOnednn || !s.threads ||
        *s.threads >= cores)
      continue;
    g.time_ns += s.time_ns;
    g.flops += s.flops;
    g.flops_by_dtype[s.dtype] += s.flops;
  }
  double pct = share(g.time_ns, m.share_base_ns());
  if (g.time_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "torch intra-op threads";
  c.evidence = {{"torch_threads", threads},
                {"cores", cores},
                {"onednn_time_s", seconds(g.time_ns)},
                {"onednn_pct_run", pct},
                {"onednn_gflops", g.flops / static_cast<double>(g.time_ns)}};
  c.summary = fmt::format(
      "torch runs {} intra-op thread{} of {} available; its oneDNN calls on them take {:.1f} % "
      "of the busy threads' time outside set-up ({:.3f} s)",
      threads, threads == 1 ? "" : "s", cores, pct, seconds(g.time_ns));
  if (workers > 0) {
    c.evidence.emplace_back("loader_workers", workers);
    c.summary += fmt::format(" ({} of the {} cores left by {} DataLoader worker{})", cores,
                             *host_cores, workers, workers == 1 ? "" : "s");
  }
  // What lowered it, where the file says: the environment's variable, else torch's own choice
  // or the program's call (the advice blamed the program's set_num_threads or OMP_NUM_THREADS
  // where it had neither: torch chose 1 thread on this 2-core VM by itself).
  // The variable only where the pool has its number: a red team's program called
  // torch.set_num_threads(1) under OMP_NUM_THREADS=2 and was told the environment set it.
  std::string why;
  for (const char* var : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"})
    if (auto e = m.facts.info.find(std::string("env.") + var); e != m.facts.info.end()) {
      char* end = nullptr;
      long value = std::strtol(e->second.c_str(), &end, 10);
      why = end != e->second.c_str() && value != threads
                ? fmt::format(
                      "; not the environment's {}={}, which would give {}: the program's "
                      "torch.set_num_threads({}) set it",
                      var, e->second, value, threads)
                : fmt::format("; the environment's {}={} sets it", var, e->second);
      break;
    }
  if (why.empty())
    why =
        "; no OMP_NUM_THREADS was set: torch chose it at start, or the program's "
        "torch.set_num_threads did";
  c.advice = fmt::format(
      "give torch's intra-op pool the {} cores{}: torch.set_num_threads({}) at the program's "
      "start{}; oneDNN's convolutions and matmuls run on that pool, whatever the BLAS is set to",
      cores, workers > 0 ? " the DataLoader workers leave" : "", cores, why);
  say_ranks(c, m);
  more_threads_gain(c, m, g, threads, cores);
  busy_host(c, in, threads, cores, seconds(g.time_ns));
  return {c};
}

// ---- threads-contended ------------------------------------------------------------------

// More compute threads than the cores other programs leave: a red-team CNN whose program set
// torch.set_num_threads(2), on 2 cores at load 5.5, ran its loop in 32.5 s, and in 0.53 s on
// one thread (every operator with a parallel region 100 times slower: aten::add_ 625 us a call
// against 2.9). Its candidates blamed the layout, the convolutions' shapes and the optimizer,
// and advised all cores for torch's pool, which it had. The blas-threads and framework-threads
// rules stay silent where the threads already fill the cores; this one speaks instead.
std::vector<Candidate> threads_contended(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto cores = m.facts.cores_per_rank();
  if (!cores) return {};
  std::int64_t torch_threads = 0;
  if (auto it = m.facts.info.find("torch.num_threads"); it != m.facts.info.end())
    torch_threads = std::atoll(it->second.c_str());
  std::int64_t blas = m.facts.blas_threads.value_or(0);
  std::int64_t threads = std::max(torch_threads, blas);
  if (threads < 2) return {};
  // A CPU quota that binds holds the threads to its whole cores (available_cores), whatever
  // the host's other load; else the others' load as busy_host believes it.
  bool quota = m.facts.quota_binds();
  auto periods = info_number(m.facts, "cpu.periods");
  auto throttled = info_number(m.facts, "cpu.throttled_periods");
  bool counted = periods && throttled && *periods > 0;
  // Under a quota, where the counters were read, it must have stopped the cgroup in 5 % of its
  // periods: threads that wait for work of their own (a pool of 64 on 4 cores' quota, idle)
  // cost nothing there.
  if (quota && counted && *throttled < 0.05 * *periods) return {};
  std::optional<OthersLoad> believed = quota ? std::nullopt : believed_others(in);
  if (!quota && !believed) return {};
  double left = static_cast<double>(*cores) - (quota ? 0.0 : believed->cores);
  std::int64_t room = std::max<std::int64_t>(1, static_cast<std::int64_t>(left));
  if (threads <= room) return {};
  // The work of the pools wider than the room: the BLAS's calls on its own; oneDNN's calls
  // (outermost: a BLAS under a oneDNN call is counted once) and the operators' own time, whose
  // element-wise loops and reductions run on torch's pool. Not torch.distributed's calls
  // (library c10d), whose own time is waiting (a DDP rendezvous's 2.0 s read as 96 % of a
  // red-team run's "pool work", its estimate all of it), nor a pool already within the room.
  bool blas_over = blas > room, torch_over = torch_threads > room;
  std::int64_t blas_ns = 0, torch_ns = 0;
  for (const auto& r : m.routines) {
    if (r.kind == kinds::kBlas)
      blas_ns += r.incl_ns - r.blas_under_ns;
    else if (r.kind == kinds::kOnednn)
      torch_ns += r.incl_ns - r.blas_under_ns;
    else if (r.kind == kinds::kTorch && r.library != "c10d")
      torch_ns += r.excl_ns;
  }
  if (!blas_over) blas_ns = 0;
  if (!torch_over) torch_ns = 0;
  // Other programs' load, no quota, and no spinning pool of the run's own beside the BLAS: an
  // OpenBLAS not built for OpenMP (its pthreads build, Debian's, pip's and conda's) waits for
  // work without spinning, and CFS shares the cores by runnable threads, so one thread fewer
  // also takes a smaller share: two red-team numpy and torch-float64 runs at load 2.6-3.1 on 2
  // cores gained 0.05 s and -0.02 s of estimated 0.67 and 0.58. torch's OpenMP pool spins at
  // its barriers (a CNN at 2 threads on 2 busy cores: 61 times its one-thread time).
  bool blas_yields = false;
  if (const auto& lib = m.facts.blas_library; lib) {
    std::string name = *lib;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    blas_yields =
        name.find("openblas") != std::string::npos && name.find("openmp") == std::string::npos;
  }
  if (!quota && !torch_over && blas_yields && blas <= *cores) blas_ns = 0;
  std::int64_t work_ns = blas_ns + torch_ns;
  double pct = share(work_ns, m.share_base_ns());
  if (work_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = torch_threads > 0 ? "torch and BLAS threads" : "BLAS threads";
  c.evidence = {{"torch_threads", torch_threads},
                {"blas_threads", blas},
                {"cores", *cores},
                {"pool_work_s", seconds(work_ns)},
                {"pool_work_pct_run", pct}};
  std::string where;
  if (quota) {
    c.evidence.emplace_back("cpu_quota", *m.facts.cpu_quota);
    where = fmt::format("a CPU quota of {:.3g} cores (its cgroup's)", *m.facts.cpu_quota);
    auto throttled_s = info_number(m.facts, "cpu.throttled_s");
    if (counted && throttled_s) {
      c.evidence.emplace_back("throttled_pct_periods", 100.0 * *throttled / *periods);
      c.evidence.emplace_back("throttled_s", *throttled_s);
      where += fmt::format(
          ", which stopped the cgroup's threads in {:.0f} % of its periods over the run "
          "({:.3f} s in all)",
          100.0 * *throttled / *periods, *throttled_s);
    }
  } else {
    double others = believed->cores;
    c.evidence.emplace_back("others_load", others);
    c.evidence.emplace_back("cores_left_by_others", std::max(0.0, left));
    if (in.host_load) c.evidence.emplace_back("host_load", *in.host_load);
    where = believed->measured
                ? fmt::format(
                      "a host where other programs kept about {:.1f} of its {} cores busy "
                      "over the run",
                      others, *cores)
                : fmt::format(
                      "a host where the load average was {:.1f} on {} cores as the run "
                      "ended, about {:.1f} of it other programs",
                      *in.host_load, *cores, others);
  }
  std::string waited;
  if (in.busiest_cpu_share) {
    c.evidence.emplace_back("busiest_thread_cpu_pct", 100.0 * *in.busiest_cpu_share);
    waited = fmt::format("; the run's busiest thread ran on a CPU {:.0f} % of its time",
                         100.0 * *in.busiest_cpu_share);
  }
  c.summary = fmt::format(
      "the run's thread pools are {} threads wide (torch {}, BLAS {}) on {}{}; the pools' work "
      "takes {:.1f} % of the busy threads' time outside set-up ({:.3f} s)",
      threads, torch_threads > 0 ? std::to_string(torch_threads) : "not imported",
      blas > 0 ? std::to_string(blas) : "unknown", where, waited, pct, seconds(work_ns));
  // In the program's terms: torch's knob only where its pool is wider than the room (a C++ or
  // numpy program told to call torch.set_num_threads would have nothing to call; a program
  // that calls torch.set_num_threads(1) already, nothing to change).
  c.advice =
      torch_over && blas_over ? fill(rule.advice, std::to_string(room))
      : torch_over
          ? fmt::format(
                "as many threads as the cores the others leave, {0}, while the host is this "
                "busy: torch.set_num_threads({0}) at the program's start (the BLAS runs {1} "
                "already), or run where the cores are free; a parallel region waits for its "
                "slowest thread, and a thread that shares its core with another program waits "
                "out that program's time slices. Measure it (sonde tune) under the same load",
                room, blas)
          : fmt::format(
                "as many BLAS threads as the cores the others leave, {0}, while the host is this "
                "busy: OPENBLAS_NUM_THREADS={0} (MKL_NUM_THREADS, OMP_NUM_THREADS for others), "
                "or run where the cores are free; a GEMM waits for its slowest thread, and a "
                "thread that shares its core with another program waits out that program's time "
                "slices. Measure it (sonde tune) under the same load",
                room);
  if (quota)  // the quota, not other programs: its whole cores, or a larger quota
    c.advice = fmt::format(
        "as many threads as the quota's whole cores, {0}: {1}, or a larger CPU limit; past the "
        "quota every thread of the cgroup stops until the next CFS period, and a parallel "
        "region waits for the stopped ones. Measure it (sonde tune)",
        room,
        torch_over && blas_over
            ? fmt::format("torch.set_num_threads({0}) at the program's start and "
                          "OPENBLAS_NUM_THREADS={0} (OMP_NUM_THREADS={0} sets both where the "
                          "program does not)",
                          room)
        : torch_over ? fmt::format("torch.set_num_threads({}) at the program's start", room)
                     : fmt::format("OPENBLAS_NUM_THREADS={0} (OMP_NUM_THREADS={0} where the "
                                   "program sets no other)",
                                   room));
  // Each pool's work on its threads past the room.
  auto past_room = [&](std::int64_t ns, std::int64_t width) {
    return ns > 0 ? seconds(ns) * (1.0 - static_cast<double>(room) / static_cast<double>(width))
                  : 0.0;
  };
  c.est_gain_s = past_room(blas_ns, blas) + past_room(torch_ns, torch_threads);
  c.gain_bound = fmt::format(
      "the share of the pools' work on the {} thread{} past the cores left: where the pool's "
      "threads spin at its barriers (OpenMP's, torch's), each parallel region's wait for a "
      "preempted thread costs more (a red-team CNN on 2 busy cores: 61 times its one-thread "
      "time); where other programs' load is what leaves fewer cores, one thread fewer also "
      "takes a smaller share of them: measure it (sonde tune) under the same load",
      threads - room, threads - room == 1 ? "" : "s");
  say_ranks(c, m);
  return {c};
}

}  // namespace sonde::analyzers
