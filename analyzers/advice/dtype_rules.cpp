#include "advice/dtype_rules.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "advice/rule_helpers.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

// A model or its data in float64 by accident (.double(), torch.set_default_dtype, a numpy
// array made a tensor as it was): a red-team MLP ran its loop in 1.105 s, 0.540 s in float32,
// and no candidate said dtype; the one it got was about threads. Its GEMMs ran at 38-74 % of
// the float64 peak, so no shape rule saw anything either.
namespace {

// The matrix products: BLAS's GEMMs and SYRKs and oneDNN's primitives. Not the LAPACK drivers,
// vector operations or GEMVs: numpy.linalg computes in float64 whatever its inputs' dtype, and
// an all-float32 program was told to compute in float32 of its dgesv_ (a red-team find); the
// GEMVs and dger_ LAPACK makes beneath routines sonde does not intercept were summed as GEMMs.
bool matrix_product(std::string_view kind, std::string_view name) {
  if (kind == kinds::kOnednn) return true;
  return kind == kinds::kBlas &&
         (name.find("gemm") != std::string::npos || name.find("syrk") != std::string::npos);
}
bool matrix_product(const RoutineMetrics& r) { return matrix_product(r.kind, r.name); }

// A SIMD unit holds twice as many float32 lanes as float64 ones, so a calibrated pair where
// float64 reaches more than 3/4 of float32's rate was measured on a busy machine: a red team's
// `calibrate --quick` under load wrote 42.5 and 44.0 GFLOP/s at 2 threads (22.4 and 44.4 at
// one), and the candidate estimated 0.128 s where float32 gained 2.3 s of a 4.5 s loop.
constexpr double kMostPlausibleRatio = 0.75;

// One precision's GEMM peak over another's (the slower's over the faster's), as calibrated.
struct PeakRatio {
  double value = 0.5;
  std::string basis;  // how it was found, for the gain bound
  std::optional<double> slower, faster;
};

// The GEMMs (matrix products, outermost) of one dtype: their time and calls, and the routine
// with the most of the time.
struct DtypeGemms {
  std::int64_t ns = 0, calls = 0;
  std::string biggest;
  double pct = 0;  // of the busy threads' time outside set-up
  bool below(double threshold) const { return ns <= 0 || pct < threshold; }
};

DtypeGemms gemms_of_dtype(const Metrics& m, std::string_view dtype) {
  DtypeGemms g;
  std::int64_t biggest_ns = 0;
  for (const auto& r : m.routines) {
    if (!matrix_product(r) || r.dtype != dtype) continue;
    std::int64_t ns = r.incl_ns - r.blas_under_ns;  // outermost: a BLAS under oneDNN once
    g.ns += ns;
    g.calls += r.calls;
    if (ns > biggest_ns) biggest_ns = ns, g.biggest = r.name;
  }
  g.pct = share(g.ns, m.share_base_ns());
  return g;
}

// float64's GEMM peak over float32's: at the run's BLAS threads, else (implausible there) at
// one thread, else float32's lanes, twice.
PeakRatio peak_ratio(const Metrics& m) {
  std::string word = m.facts.peak_word({"gemm.f64", "gemm.f32"});
  std::optional<std::int64_t> counts[] = {m.facts.blas_threads, std::int64_t{1}};
  bool implausible = false;
  for (const auto& threads : counts) {
    auto f64 = m.facts.peak_at("gemm.f64", threads);
    auto f32 = m.facts.peak_at("gemm.f32", threads);
    if (!f64 || !f32 || *f32 <= 0) continue;
    double r = *f64 / *f32;
    if (r > kMostPlausibleRatio) {
      implausible = true;
      continue;
    }
    PeakRatio p{r,
                fmt::format(" at the {} peaks{}", word,
                            implausible ? " for 1 thread (those for the run's threads say "
                                          "float64 runs near float32's rate, which no SIMD "
                                          "unit does: calibrated on a busy machine?)"
                                        : ""),
                f64, f32};
    return p;
  }
  return {0.5,
          implausible ? fmt::format(", 1/2 (the {} peaks say float64 runs near float32's rate, "
                                    "which no SIMD unit does: calibrated on a busy machine?)",
                                    word)
                      : std::string(", 1/2 where not calibrated"),
          std::nullopt, std::nullopt};
}

}  // namespace

std::vector<Candidate> float64_gemms(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  const DtypeGemms g = gemms_of_dtype(m, "f64");
  if (g.below(rule.threshold)) return {};
  const std::int64_t f64_ns = g.ns, calls = g.calls;
  const double pct = g.pct;
  const std::string& biggest = g.biggest;
  bool torch = ran_torch(m);
  // The rates each precision reaches on this machine at the run's BLAS threads, where both are
  // calibrated and plausible; else float32's twice float64's (the SIMD lanes).
  PeakRatio pr = peak_ratio(m);
  double ratio = pr.value;
  const auto& f64 = pr.slower;
  const auto& f32 = pr.faster;
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = biggest;
  c.evidence = {{"f64_gemm_s", seconds(f64_ns)},
                {"f64_gemm_pct_run", pct},
                {"calls", calls},
                {"f64_over_f32_peak", ratio}};
  if (f64 && f32) {
    c.evidence.emplace_back("peak_f64_gflops", *f64);
    c.evidence.emplace_back("peak_f32_gflops", *f32);
  }
  c.summary = fmt::format(
      "{:.1f} % of the busy threads' time outside set-up ({:.3f} s, {} calls, most in {}) is GEMMs "
      "in float64, "
      "whose peak here is {:.0f} % of float32's",
      pct, seconds(f64_ns), calls, biggest, 100 * ratio);
  c.advice =
      torch ? "train in float32 if its precision suffices (it does for most models): torch's "
              "default is float32, so a float64 model or input came from .double(), "
              "torch.set_default_dtype(torch.float64), or numpy arrays (float64 by default) made "
              "tensors as they were (torch.from_numpy): .float() on the model and the inputs, "
              "and compare the loss"
            : "compute in float32 if its precision suffices: numpy's arrays are float64 by "
              "default (np.zeros, np.random.rand, Python floats); astype(np.float32) or "
              "dtype=np.float32 where the data is made, and compare the results";
  c.est_gain_s = seconds(f64_ns) * (1.0 - ratio);
  c.gain_bound = fmt::format(
      "the float64 GEMMs' time x (1 - float64 peak / float32 peak){}; the element-wise work "
      "in float64 moves twice the bytes too, which this leaves out",
      pr.basis);
  return {c};
}

// ---- bfloat16 ----------------------------------------------------------------------------------

// A CPU with bfloat16 matrix units (AMX on Sapphire Rapids and later, AVX512_BF16 on Cooper Lake
// and Zen 4) runs torch.autocast's bfloat16 GEMMs and convolutions in oneDNN far faster than
// float32: a red team's MLP trained 5-6 times faster so on an Emerald Rapids VM (35.2 -> 5.7 ms
// a step; its 1024^3 matmul 89 -> 1,122 GFLOP/s), and no candidate said so.
namespace {

PeakRatio bf16_ratio(const Metrics& m) {
  std::string word = m.facts.peak_word({"gemm.f32", "gemm.bf16"});
  bool implausible = false;
  for (const auto& threads : {m.facts.blas_threads, std::optional<std::int64_t>{1}}) {
    auto f32 = m.facts.peak_at("gemm.f32", threads);
    auto bf16 = m.facts.peak_at("gemm.bf16", threads);
    if (!f32 || !bf16 || *bf16 <= 0) continue;
    // bfloat16 packs two values where float32 holds one: a pair where it is not faster is a
    // busy machine's calibration, or a oneDNN without this CPU's kernels.
    if (*f32 >= *bf16) {
      implausible = true;
      continue;
    }
    return {*f32 / *bf16, fmt::format(" at the {} peaks", word), f32, bf16};
  }
  return {0.5,
          implausible ? fmt::format(", 1/2 (the {} peaks say bfloat16 is no faster than float32, "
                                    "which its packed lanes are: calibrated on a busy machine?)",
                                    word)
                      : std::string(", 1/2 where not calibrated (`sonde calibrate` measures "
                                    "gemm.bf16 with oneDNN)"),
          std::nullopt, std::nullopt};
}

// The float32 GEMMs torch.autocast would take: the matrix products' outermost calls beneath a
// torch operator (a numpy GEMM of a program that also ran a torch operator was counted, and told
// autocast), of a oneDNN primitive only its float32 calls' share (its shapes: oneDNN keeps
// float32 ones alone, so an autocast run's bfloat16 convolutions with four float32 evaluation
// calls read all float32, a review's case).
DtypeGemms torch_f32_gemms(const AdviceInput& in) {
  const Metrics& m = in.metrics;
  std::map<std::int64_t, std::int64_t> f32_shape_ns;
  for (const ShapeMetrics& s : m.shapes)
    if (s.dtype == "f32") f32_shape_ns[s.routine_id] += s.time_ns;
  DtypeGemms g;
  double biggest_ns = 0;
  for (const auto& r : m.routines) {
    if (!matrix_product(r) || r.incl_ns <= 0) continue;
    auto under = in.gemm_under_torch_ns.find(r.routine_id);
    if (under == in.gemm_under_torch_ns.end()) continue;
    double f32 = r.kind == kinds::kOnednn
                     ? std::min(1.0, double(f32_shape_ns[r.routine_id]) / double(r.incl_ns))
                     : (r.dtype == "f32" ? 1.0 : 0.0);
    double ns = double(under->second) * f32;
    if (ns <= 0) continue;
    g.ns += std::int64_t(ns);
    g.calls += std::int64_t(std::llround(double(r.calls) * f32));
    if (ns > biggest_ns) biggest_ns = ns, g.biggest = r.name;
  }
  g.pct = share(g.ns, m.share_base_ns());
  return g;
}

}  // namespace

std::map<std::int64_t, std::int64_t> torch_gemm_time(const std::vector<ThreadTree>& threads) {
  std::map<std::int64_t, std::int64_t> out;
  // Per depth on the path from the root: a torch operator above, and a matrix product above
  // (its calls beneath are not outermost).
  std::vector<std::pair<bool, bool>> above;
  for (const ThreadTree& t : threads) {
    above.clear();
    for_each_node(t.root, [&](const CallNode& n, int depth) {
      above.resize(std::size_t(depth) + 1);
      auto [torch, product] = depth > 0 ? above[std::size_t(depth) - 1] : std::pair{false, false};
      bool is_product = matrix_product(n.kind.str(), n.name.str());
      if (is_product && torch && !product) out[n.routine_id] += n.incl_ns;
      above[std::size_t(depth)] = {torch || n.kind.str() == kinds::kTorch, product || is_product};
    });
  }
  return out;
}

std::vector<Candidate> float32_gemms_on_bf16(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto unit = m.facts.info.find("cpu.bf16");
  if (unit == m.facts.info.end() || !ran_torch(m)) return {};
  const DtypeGemms g = torch_f32_gemms(in);
  if (g.below(rule.threshold)) return {};
  PeakRatio ratio = bf16_ratio(m);
  bool amx = unit->second == "amx";
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = g.biggest;
  c.evidence = {{"f32_gemm_s", seconds(g.ns)},
                {"f32_gemm_pct_run", g.pct},
                {"calls", g.calls},
                {"cpu_bf16", unit->second},
                {"f32_over_bf16_peak", ratio.value}};
  if (ratio.slower && ratio.faster) {
    c.evidence.emplace_back("peak_f32_gflops", *ratio.slower);
    c.evidence.emplace_back("peak_bf16_gflops", *ratio.faster);
  }
  std::string rates = ratio.slower && ratio.faster
                          ? fmt::format("float32's peak {:.0f} % of bfloat16's", 100 * ratio.value)
                          : std::string("bfloat16 taken as twice float32's rate: not calibrated");
  c.summary = fmt::format(
      "{:.1f} % of the busy threads' time outside set-up ({:.3f} s, {} calls, most in {}) is "
      "torch's GEMMs in float32 on a CPU with bfloat16 {} ({})",
      g.pct, seconds(g.ns), g.calls, g.biggest,
      amx ? "matrix units (AMX)" : "dot products (AVX512_BF16)", rates);
  c.advice =
      "mixed precision, if the model's accuracy holds in it (it does for most training): run "
      "the forward pass and the loss under torch.autocast(\"cpu\", dtype=torch.bfloat16) (the "
      "backward follows it; the weights and the optimizer stay float32, no GradScaler needed), "
      "or the model's call in inference; its GEMMs and convolutions then run in oneDNN's "
      "bfloat16 kernels. Compare the loss curve or the metrics with float32's";
  c.est_gain_s = seconds(g.ns) * (1.0 - ratio.value);
  c.gain_bound = fmt::format(
      "the float32 GEMMs' time x (1 - float32 peak / bfloat16 peak){}; the casts autocast adds "
      "(each weight and activation read and written once more in bfloat16) are left out",
      ratio.basis);
  return {c};
}

}  // namespace sonde::analyzers
