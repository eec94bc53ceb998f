#include "advice/blas_rules.hpp"

#include <fmt/format.h>

#include <array>
#include <string>
#include <string_view>

#include "advice/rule_helpers.hpp"
#include "metrics/blas_kernels.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

// BLAS levels 1 and 2 (vector and matrix-vector calls), by name without "cblas_", the type
// letter and Fortran's '_': memory-bound, they gain little from wider vectors, and the rule
// counts the rest, GEMM-like level 3 and the LAPACK routines built on it.
constexpr std::array<std::string_view, 48> kVectorCalls = {
    "dot",  "dotu",  "dotc",  "dsdot", "sdot",  "axpy",  "axpby", "scal", "sscal", "dscal",
    "nrm2", "cnrm2", "znrm2", "asum",  "casum", "zasum", "copy",  "swap", "rot",   "rotg",
    "rotm", "rotmg", "srot",  "drot",  "gemv",  "gbmv",  "symv",  "sbmv", "spmv",  "trmv",
    "tbmv", "tpmv",  "trsv",  "tbsv",  "tpsv",  "ger",   "geru",  "gerc", "syr",   "syr2",
    "spr",  "spr2",  "hemv",  "hbmv",  "hpmv",  "her",   "her2",  "hpr"};

bool vector_call(std::string_view name) {
  if (name.starts_with("cblas_")) name.remove_prefix(6);
  while (name.ends_with('_')) name.remove_suffix(1);
  if (name.size() < 2) return false;
  if (name[0] == 'i' && (name.ends_with("amax") || name.ends_with("amin"))) return true;
  name.remove_prefix(1);  // the type letter: s, d, c, z
  for (std::string_view v : kVectorCalls)
    if (name == v) return true;
  return false;
}

// LAPACK's eigenvalue, SVD and least-squares drivers, timed with no FLOP model: much of their
// time is their own loops and level-2 calls, not the level-3 kernels the CPU's vectors would
// widen. Other kernels gained a red team's svd of 3000 x 60 4 %, 40,000 8 x 8 eigh nothing (7 %
// slower) and a 300 x 300 eig half, where the rule promised 75 % of each.
bool lapack_driver(std::string_view name) {
  for (std::string_view d : {"syevd_", "gesdd_", "geev_", "gelsd_"})
    if (name.find(d) != std::string_view::npos) return true;
  return false;
}

std::string isa_name(std::string_view isa) {
  if (isa == "avx512") return "AVX-512";
  if (isa == "avx2") return "AVX2";
  if (isa == "avx") return "AVX";
  return "SSE";
}

}  // namespace

std::vector<Candidate> blas_kernels(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  auto config = m.facts.info.find("blas.config");
  auto cpu = m.facts.info.find("cpu.vector_isa");
  if (config == m.facts.info.end() || cpu == m.facts.info.end()) return {};
  auto kernels = openblas_kernels(config->second);
  if (!kernels || !kernels_narrower(*kernels, cpu->second)) return {};
  std::int64_t ns = 0, calls = 0, biggest_ns = 0, drivers_ns = 0;
  std::string biggest;
  for (const auto& r : m.routines) {
    if (r.kind != kinds::kBlas || vector_call(r.name)) continue;
    ns += r.incl_ns;
    calls += r.calls;
    if (lapack_driver(r.name)) drivers_ns += r.incl_ns;
    if (r.incl_ns > biggest_ns) biggest_ns = r.incl_ns, biggest = r.name;
  }
  double pct = share(ns, m.share_base_ns());
  if (ns <= 0 || pct < rule.threshold) return {};
  int have = vector_bits(kernels->isa), could = vector_bits(cpu->second);
  std::string coretype = coretype_for(cpu->second);
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = biggest;
  c.evidence = {{"blas_config", config->second},
                {"kernels", kernels->core},
                {"kernel_isa", kernels->isa},
                {"cpu_isa", cpu->second},
                {"blas_s", seconds(ns)},
                {"blas_pct_run", pct},
                {"calls", calls}};
  c.summary = fmt::format(
      "OpenBLAS runs its {} kernels ({}, {}-bit vectors) on a CPU with {} ({}-bit): its "
      "matrix-matrix and LAPACK calls take {:.1f} % of the busy threads' time outside set-up "
      "({:.3f} s, {} "
      "calls, most in {})",
      kernels->core, isa_name(kernels->isa), have, isa_name(cpu->second), could, pct, seconds(ns),
      calls, biggest);
  c.advice =
      kernels->dynamic_arch
          ? fmt::format(
                "OPENBLAS_CORETYPE={} in the program's environment has this OpenBLAS use its {} "
                "kernels: its DYNAMIC_ARCH chooses them by the CPU's model, and a release older "
                "than the CPU falls back to old ones. Or use a newer OpenBLAS (numpy's and "
                "torch's pip wheels carry their own). Compare the results: other kernels sum in "
                "another order",
                coretype, isa_name(cpu->second))
          : fmt::format(
                "this OpenBLAS was built for {} only: use one built for this CPU or with "
                "DYNAMIC_ARCH (Debian's libopenblas0 is; numpy's and torch's pip wheels carry "
                "their own), and compare the results",
                kernels->core);
  c.est_gain_s = seconds(ns - drivers_ns) * (1.0 - double(have) / double(could));
  c.gain_bound = fmt::format(
      "their time x (1 - {} / {}), the kernels' vector width over the CPU's; FMA and the "
      "memory-bound calls' smaller gain left out",
      have, could);
  if (drivers_ns > 0) {
    c.evidence.emplace_back("lapack_drivers_s", seconds(drivers_ns));
    c.gain_bound += fmt::format(
        "; the LAPACK drivers' {:.3f} s (eigenvalues, SVD, least squares) not counted: much "
        "of it is their own loops, which the kernels leave as they are (a red team's svd "
        "gained 4 %, an 8 x 8 eigh nothing, a 300 x 300 eig half)",
        seconds(drivers_ns));
  }
  return {c};
}

}  // namespace sonde::analyzers
