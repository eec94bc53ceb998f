#include "advice/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "advice/fpu_rules.hpp"
#include "advice/gpu_rules.hpp"
#include "advice/rank_rules.hpp"
#include "advice/rule_helpers.hpp"
#include "profile/call_tree.hpp"

namespace sonde::analyzers {
namespace {

using namespace rules_detail;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const LineFunction* lines_of(const AdviceInput& in, const std::string& routine) {
  for (const auto& f : in.lines.functions)
    if (f.name == routine) return &f;
  return nullptr;
}

// ---- optimizer-update -------------------------------------------------------------------

// The update's advice in the language it is written in. The rule's own text is numpy's (the
// reference Python workload); torch's per-parameter loops (torch.optim's _single_tensor_adam,
// _single_tensor_sgd, ...) have a multi-tensor path, and a region of a program without Python
// frames is C or C++, whose loop is the compiler's to vectorise.
constexpr std::string_view kTorchUpdateAdvice =
    "use torch.optim's multi-tensor path instead of the per-parameter loop in {}: pass "
    "foreach=True to the optimizer (fused=True where it has one, on CUDA), or torch.compile the "
    "training step (PyTorch 2): one kernel per operation for all parameters instead of one per "
    "parameter tensor";
constexpr std::string_view kNativeUpdateAdvice =
    "vectorise and fuse the update loop in {}: build with -O3 -march=native and check that the "
    "loop vectorises (-fopt-info-vec-missed), mark the arrays __restrict, fuse the update's "
    "loops into one pass over each parameter, and spread it over the cores with OpenMP "
    "(#pragma omp parallel for simd)";

std::string_view update_advice(const Metrics& m, const RoutineMetrics& r, const Rule& rule) {
  std::string fn = r.kind == "python" ? function_part(r.name) : r.name;
  if (r.kind == "python" && (fn.starts_with("_single_tensor_") || fn.starts_with("_multi_tensor_")))
    return kTorchUpdateAdvice;
  bool python = std::any_of(m.routines.begin(), m.routines.end(),
                            [](const RoutineMetrics& x) { return x.kind == "python"; });
  if (r.kind != "python" && !python) return kNativeUpdateAdvice;
  return rule.advice;
}

std::vector<Candidate> optimizer_update(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  std::vector<const RoutineMetrics*> hits;
  for (const RoutineMetrics* r : phases(m)) {
    if (!looks_like_optimizer(r->name)) continue;
    if (share(r->incl_ns, m.run_ns()) < rule.threshold) continue;
    // Low efficiency: the phase is not a GEMM in disguise (little time in FLOP-counted calls).
    if (r->blas_pct.value_or(0.0) >= 25.0) continue;
    hits.push_back(r);
  }
  // An update() that spends most of its time in update_core_cpu() is reported once, as the
  // inner, more specific function: a hit with half or more of its time in optimizer-like
  // phases called beneath it is left out.
  std::vector<Candidate> out;
  for (const RoutineMetrics* r : hits) {
    auto inner = in.optimizer_inner_ns.find(r->name);
    if (inner != in.optimizer_inner_ns.end() && 2 * inner->second >= r->incl_ns) continue;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = r->name;
    c.routine_id = r->routine_id;
    std::string fn = r->kind == "python" ? function_part(r->name) : r->name;
    double gflops = r->gflops_under.value_or(0.0), blas_pct = r->blas_pct.value_or(0.0);
    c.evidence = {{"time_s", seconds(r->incl_ns)},
                  {"pct_run", share(r->incl_ns, m.run_ns())},
                  {"calls", r->calls},
                  {"blas_time_s", seconds(r->blas_under_ns)},
                  {"blas_pct", blas_pct},
                  {"gflops", gflops}};
    c.summary = fmt::format("{} takes {:.1f} % of the run ({:.3f} s over {} calls), {:.1f} % of "
                            "it in FLOP-counted BLAS ({:.3f} GFLOP/s)",
                            fn, share(r->incl_ns, m.run_ns()), seconds(r->incl_ns), r->calls,
                            blas_pct, gflops);
    std::string where = fn;
    if (const LineFunction* f = lines_of(in, r->name)) {
      std::vector<const LineRow*> rows;
      for (const auto& l : f->lines)
        if (l.recorded) rows.push_back(&l);
      std::stable_sort(rows.begin(), rows.end(),
                       [](const LineRow* a, const LineRow* b) { return a->time_ns > b->time_ns; });
      std::vector<std::string> named;
      for (std::size_t i = 0; i < rows.size() && i < 2; ++i) {
        const LineRow& l = *rows[i];
        std::string p = i == 0 ? "hottest_line" : "second_line";
        c.evidence.emplace_back(p, l.line);
        c.evidence.emplace_back(p + "_pct", l.pct);
        std::string text = l.contents;
        text.erase(0, text.find_first_not_of(" \t"));
        if (!text.empty()) c.evidence.emplace_back(p + "_text", text);
        named.push_back(fmt::format("line {} ({:.1f} %{})", l.line, l.pct,
                                    text.empty() ? "" : ": " + text));
      }
      if (!named.empty()) {
        c.summary += "; hottest: " + named[0];
        if (named.size() > 1) c.summary += ", then " + named[1];
        where += fmt::format(" (line {} first)", rows[0]->line);
      }
    }
    c.advice = fill(update_advice(m, *r, rule), where);
    c.est_gain_s = 0.8 * seconds(r->incl_ns - r->blas_under_ns);
    out.push_back(std::move(c));
  }
  return out;
}

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

std::vector<Candidate> blas_threads(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto threads = m.facts.blas_threads;
  auto cores = m.facts.available_cores();
  if (!threads || !cores || *threads >= *cores) return {};
  GemmTotals g = gemm_totals(m);
  double pct = share(g.time_ns, m.run_ns());
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
  c.est_gain_s = seconds(g.time_ns) *
                 (1.0 - static_cast<double>(*threads) / static_cast<double>(*cores));
  return {c};
}

// ---- gemm-shape -------------------------------------------------------------------------

std::vector<Candidate> gemm_shape(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  constexpr double kMinShare = 1.0;   // % of the run a shape must take to be worth a look
  constexpr double kPeakPct = 10.0;   // below this % of peak is "far below peak"
  std::map<std::pair<std::string, std::string>, double> best;  // routine, dtype
  for (const auto& s : m.shapes)
    if (s.perf.gflops && share(s.time_ns, m.run_ns()) >= kMinShare) {
      double& b = best[{s.routine, s.dtype}];
      b = std::max(b, *s.perf.gflops);
    }
  std::vector<Candidate> out;
  for (const auto& s : m.shapes) {
    if (!s.perf.gflops || share(s.time_ns, m.run_ns()) < kMinShare) continue;
    double g = *s.perf.gflops;
    double b = best[{s.routine, s.dtype}];
    bool vs_best = g < rule.threshold / 100.0 * b;
    bool vs_peak = s.perf.pct_peak && *s.perf.pct_peak < kPeakPct;
    if (!vs_best && !vs_peak) continue;
    double target = b;
    if (vs_peak) target = std::max(target, *s.perf.gflops / *s.perf.pct_peak * kPeakPct);
    if (target <= g) continue;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = fmt::format("{} {}x{}x{} at {}", s.routine, s.m, s.n, s.k, s.call_site);
    std::int64_t small = std::min({s.m, s.n, s.k});
    c.evidence = {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"dtype", s.dtype}, {"calls", s.calls},
                  {"time_s", seconds(s.time_ns)}, {"pct_run", share(s.time_ns, m.run_ns())},
                  {"gflops", g}, {"best_shape_gflops", b}};
    if (s.perf.pct_peak) c.evidence.emplace_back("pct_peak", *s.perf.pct_peak);
    if (s.perf.intensity) c.evidence.emplace_back("flops_per_byte", *s.perf.intensity);
    std::string why = vs_best ? fmt::format("{:.0f} % of the routine's best shape ({:.2f} GFLOP/s)",
                                            100.0 * g / b, b)
                              : "";
    if (vs_peak) why += fmt::format("{}{:.1f} % of peak", why.empty() ? "" : ", ", *s.perf.pct_peak);
    c.summary = fmt::format("{} {}x{}x{} ({}, {} calls, {:.3f} s) reaches {:.2f} GFLOP/s: {}{}",
                            s.routine, s.m, s.n, s.k, s.call_site, s.calls, seconds(s.time_ns), g,
                            why, small < 64 ? fmt::format("; skinny (smallest side {})", small)
                                            : "");
    c.advice = std::string(rule.advice);
    c.est_gain_s = seconds(s.time_ns) * (1.0 - g / target);
    out.push_back(std::move(c));
  }
  return out;
}

// ---- unmeasured -------------------------------------------------------------------------

std::vector<Candidate> unmeasured(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  double pct = share(m.unmeasured_ns, m.total_ns);
  if (pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "<thread>";
  c.evidence = {{"unmeasured_s", seconds(m.unmeasured_ns)}, {"pct_total", pct},
                {"total_s", seconds(m.total_ns)}};
  c.summary = fmt::format("{:.1f} % of the threads' time ({:.3f} s) is outside any measured "
                          "routine", pct, seconds(m.unmeasured_ns));
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0;  // unknown until that time is attributed
  return {c};
}

// ---- onednn-reorder ---------------------------------------------------------------------

// oneDNN reorders copy a tensor from one memory layout into another (PyTorch's NCHW tensors into
// the blocked layout its convolutions want, and back): no arithmetic, only a copy the model's
// layout could avoid.
std::vector<Candidate> onednn_reorder(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  for (const RoutineMetrics& r : m.routines) {
    if (r.kind != "onednn" || r.name != "dnnl:reorder") continue;
    double pct = share(r.incl_ns, m.run_ns());
    if (pct < rule.threshold) return {};
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = r.name;
    c.routine_id = r.routine_id;
    c.evidence = {{"time_s", seconds(r.incl_ns)}, {"pct_run", pct}, {"calls", r.calls}};
    c.summary = fmt::format("oneDNN layout reorders take {:.1f} % of the run ({:.3f} s over {} "
                            "calls)",
                            pct, seconds(r.incl_ns), r.calls);
    c.advice = std::string(rule.advice);
    c.est_gain_s = 0.5 * seconds(r.incl_ns);
    return {c};
  }
  return {};
}

const std::array<Rule, 13> kRules{{
    {"optimizer-update",
     "a region or Python function named like update/adam/sgd/optimizer takes at least "
     "threshold % of the run's wall time with under 25 % of its time in FLOP-counted BLAS",
     5.0,
     "fuse and vectorise the parameter update in {}: one pass over each parameter (a fused or "
     "foreach optimizer, numexpr/numba, or a compiled kernel) instead of one temporary per "
     "numpy operation",
     "0.8 x (its inclusive time - BLAS time under it)", optimizer_update},
    {"blas-threads",
     "run_info blas.threads < available cores (affinity_cores, else cores) and FLOP-counted "
     "BLAS/oneDNN calls take at least threshold % of the run's wall time",
     5.0,
     "let BLAS use all {} cores (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS unset "
     "or raised), or link a multi-threaded BLAS",
     "GEMM time x (1 - blas.threads / cores)", blas_threads},
    {"subnormals",
     "fpu.ftz = 0 and fpu.daz = 0 and a note of topic 'denormals' (subnormal GEMM operands or "
     "Python call arguments sampled); threshold is the cost of arithmetic on a subnormal "
     "element against a normal one (4x: float32 division 4.2x, square root 2.7x measured here)",
     4.0,
     "enable flush-to-zero and denormals-are-zero (MXCSR FTZ/DAZ, e.g. -ffast-math at link, "
     "torch.set_flush_denormal(True)), or rescale the values that underflow",
     "T f (p - 1) / (1 - f + f p), p = threshold, T the time of the routines named in the notes "
     "(else of the BLAS/oneDNN calls), f the sampled share of subnormal elements (1 unknown: "
     "at most T (1 - 1/p))",
     subnormals},
    {"gemm-shape",
     "a GEMM shape taking at least 1 % of the run reaches under threshold % of its routine's "
     "best shape GFLOP/s, or under 10 % of the peak when known",
     50.0,
     "batch the small or skinny products into larger GEMMs (concatenate, batched GEMM), "
     "reorder dimensions so the long side is not k, or pick a layout the BLAS handles better",
     "shape time x (1 - GFLOP/s / target), target = max(best shape GFLOP/s, 10 % of peak)",
     gemm_shape},
    {"unmeasured",
     "the thread roots' exclusive time (outside any measured routine) is at least threshold % "
     "of the run",
     20.0,
     "attribute that time: mark phases with sonde regions (with sonde.region(\"forward\") in "
     "Python, sonde_region_begin/end in C and C++, or NVTX ranges), run "
     "Python under python3 -m sonde, or check start-up and idle threads",
     "0 (unknown until that time is measured)", unmeasured},
    {"onednn-reorder",
     "oneDNN's reorders (dnnl:reorder: copies of a tensor into another memory layout) take at "
     "least threshold % of the run's wall time",
     5.0,
     "keep tensors in the layout the convolutions use: channels-last in PyTorch "
     "(model.to(memory_format=torch.channels_last) and the inputs too), and for inference "
     "torch.jit.freeze, which reorders the weights once instead of at every call",
     "0.5 x reorder time (the reorders at the model's inputs and outputs remain)",
     onednn_reorder},
    {"gpu-copies",
     "host<->device copies (CPU time in CUDA copy calls naming HtoD or DtoH, else the GPU's "
     "memcpy activity time) take at least threshold % of the run's wall time",
     5.0,
     "keep tensors on the device between steps, copy from pinned memory (cudaMallocHost, "
     "DataLoader(pin_memory=True)) with asynchronous copies that overlap compute, and batch "
     "small copies",
     "0.5 x copy time (what overlapping or removing copies typically hides)", gpu_copies},
    {"gpu-sync",
     "CUDA synchronisation calls (names with Synchronize) take at least threshold % of the run's "
     "wall time: the host waits for the GPU instead of queueing work",
     5.0,
     "remove per-step host synchronisation (loss.item(), .cpu(), printing tensors, "
     "cudaDeviceSynchronize in the loop); synchronise with events on streams, and read metrics "
     "every N steps",
     "0.5 x synchronisation time", gpu_syncs},
    {"gpu-launches",
     "CPU time in kernel launch calls (names with Launch) is at least threshold % of the run's "
     "wall time",
     5.0,
     "launch fewer, larger kernels: fuse elementwise operations (torch.compile, fused "
     "optimizers), capture the step in a CUDA graph, or enlarge the batch",
     "0.5 x launch time", gpu_launches},
    {"gpu-kernel",
     "a GPU kernel takes at least threshold % of the GPU's kernel time; ranked as TAU ranks "
     "tuning candidates, by warps per instruction x time where SONDE_GPU_METRICS recorded them, "
     "else by time",
     10.0,
     "look at {} first: check its occupancy, memory throughput and warp efficiency "
     "(SONDE_GPU_METRICS, or Nsight Compute: ncu -k <kernel>), and its grid and block sizes",
     "0.5 x time x (1 - the larger of its SM and memory throughput % of peak / 100) where those "
     "metrics were recorded, else 0", gpu_kernels},
    {"rank-imbalance",
     "a routine or phase (outside communication) takes its slowest rank at least threshold % "
     "longer than the mean over ranks, and the difference is at least 1 % of a rank's busy time",
     10.0,
     "even out the work per rank (partition the data or the model by cost, not by count), or "
     "move the slow rank's extra work (I/O, logging, checkpoints on rank 0) off the step",
     "max - mean (what the other ranks wait for the slowest)", rank_imbalance},
    {"comm-exposed",
     "time inside blocking communication and waits is at least threshold % of a rank's busy "
     "time, on average over ranks",
     10.0,
     "overlap communication with computation: start nonblocking collectives (MPI_Iallreduce per "
     "layer during backward, DDP's bucketed all-reduce) and wait only where the result is needed",
     "0.5 x exposed time per rank", comm_exposed},
    {"small-collectives",
     "a collective of messages under threshold KiB is called at least 10 times per rank and "
     "takes at least 1 % of a rank's busy time",
     64.0,
     "fuse or bucket the small collectives: flatten the tensors into one buffer per step (or "
     "per bucket of ~25 MB, as DDP's bucket_cap_mb) and reduce it with one call",
     "0.5 x their time per rank", small_collectives},
}};

}  // namespace

bool looks_like_optimizer(std::string_view routine_name) {
  std::string fn = lower(function_part(routine_name));
  for (std::string_view word : {"update", "adam", "sgd", "optimizer", "optimiser"})
    if (fn.find(word) != std::string::npos) return true;
  return false;
}

std::span<const Rule> rules() { return kRules; }

namespace {
bool optimizer_phase(const CallNode& n) {
  return (n.kind == "region" || n.kind == "python") && looks_like_optimizer(n.name);
}

void walk_optimizers(const CallNode& node, const CallNode* enclosing,
                     std::map<std::string, std::int64_t>& inner) {
  const CallNode* next = enclosing;
  if (optimizer_phase(node)) {
    if (enclosing && enclosing->name != node.name) inner[enclosing->name] += node.incl_ns;
    if (!enclosing || enclosing->name != node.name) next = &node;
  }
  for (const auto& child : node.children) walk_optimizers(child, next, inner);
}
}  // namespace

AdviceInput load_advice_input(const ProfileFile& file) {
  LoadedProfile profile(file);
  return load_advice_input(profile);
}

AdviceInput load_advice_input(LoadedProfile& profile) {
  const ProfileFile& file = profile.file();
  AdviceInput in;
  in.metrics = profile.metrics();
  in.notes = profile.run().notes;
  in.gpu = profile.gpu();
  in.ranks = load_rank_summary(file);
  for (const ThreadTree& t : profile.forest().busy)
    walk_optimizers(t.root, nullptr, in.optimizer_inner_ns);
  bool has_lines = false;
  if (file.has_table("line_costs")) {
    auto st = file.prepare("SELECT EXISTS (SELECT 1 FROM line_costs)");
    has_lines = st.step() && st.int64(0) != 0;
  }
  if (has_lines) in.lines = compute_line_costs(file);
  return in;
}

std::vector<Candidate> evaluate_rules(const AdviceInput& input, std::span<const Rule> rule_table) {
  std::vector<std::pair<std::size_t, Candidate>> all;
  for (std::size_t i = 0; i < rule_table.size(); ++i)
    for (auto& c : rule_table[i].evaluate(input, rule_table[i])) all.emplace_back(i, std::move(c));
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.second.est_gain_s != b.second.est_gain_s) return a.second.est_gain_s > b.second.est_gain_s;
    return a.first < b.first;  // then each rule's own ranking
  });
  std::vector<Candidate> out;
  for (auto& [i, c] : all) out.push_back(std::move(c));
  return out;
}

std::vector<Candidate> compute_candidates(const ProfileFile& file) {
  return evaluate_rules(load_advice_input(file), rules());
}

std::vector<Candidate> compute_candidates(LoadedProfile& profile) {
  return evaluate_rules(load_advice_input(profile), rules());
}

namespace {
std::string cell_text(const Cell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&cell)) return fmt::format("{:.4g}", *d);
  if (const auto* s = std::get_if<std::string>(&cell)) return visible(*s);
  return "-";
}
}  // namespace

std::string render_candidates_text(const std::vector<Candidate>& cs, std::size_t top) {
  if (cs.empty()) return "no tuning candidates: no rule fired\n";
  std::size_t n = top == 0 ? cs.size() : std::min(top, cs.size());
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = cs[i];
    out += fmt::format("{}. [{}] {}  (est. gain {:.3f} s)\n", i + 1, c.rule,
                       visible(c.location), c.est_gain_s);
    out += fmt::format("   {}\n", visible(c.summary));
    std::string ev;
    for (const auto& [k, v] : c.evidence) ev += fmt::format("{}{}={}", ev.empty() ? "" : ", ", k, cell_text(v));
    out += fmt::format("   evidence: {}\n", ev);
    out += fmt::format("   advice: {}\n", visible(c.advice));
    if (const auto& m = c.measured)
      out += fmt::format("   measured: estimated {:.3f} s, measured {:.3f} s by sonde tune (stage {}, "
                         "{} time): {}\n", m->estimated_s, m->measured_s, m->stage,
                         m->judged_on == "cpu" ? "CPU" : "wall", m->verdict);
  }
  if (n < cs.size()) out += fmt::format("({} more candidates; --top 0 shows all)\n", cs.size() - n);
  return out;
}

Table candidates_table(const std::vector<Candidate>& cs, std::size_t top) {
  Table t;
  t.columns = {{"rank", "rank", 0},       {"rule", "rule", 0},       {"location", "location", 0},
               {"est. gain s", "est_gain_s", 3}, {"summary", "summary", 0},
               {"advice", "advice", 0},   {"evidence", "evidence", 0}};
  Json all = render_candidates_json(cs, top);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Candidate& c = cs[i];
    t.rows.push_back({static_cast<std::int64_t>(i + 1), c.rule, c.location, c.est_gain_s,
                      c.summary, c.advice, dump_json(all[i]["evidence"], -1)});
  }
  return t;
}

Json render_candidates_json(const std::vector<Candidate>& cs, std::size_t top) {
  std::size_t n = top == 0 ? cs.size() : std::min(top, cs.size());
  Json out = Json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = cs[i];
    Json ev = Json::object();
    for (const auto& [k, v] : c.evidence) ev[k] = cell_to_json(v);
    out.push_back(Json{{"rule", c.rule},
                       {"location", c.location},
                       {"routine_id", c.routine_id ? Json(*c.routine_id) : Json(nullptr)},
                       {"summary", c.summary},
                       {"evidence", std::move(ev)},
                       {"advice", c.advice},
                       {"est_gain_s", c.est_gain_s}});
    if (const auto& m = c.measured)
      out.back()["measured"] = Json{{"stage", m->stage},         {"judged_on", m->judged_on},
                                    {"estimated_s", m->estimated_s}, {"measured_s", m->measured_s},
                                    {"verdict", m->verdict},     {"source", m->source}};
  }
  return out;
}

}  // namespace sonde::analyzers
