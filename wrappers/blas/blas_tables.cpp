// The BLAS wrapper tables' registry (blas_tables.hpp), and what describes the BLAS in use for
// the run's metadata (its library, threads, configuration, subnormal samples), whichever table's
// routines the program called (blas_wrappers.cpp makes one table per naming).
#include "blas_tables.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

#include "blas_models.hpp"
#include "sonde/process_hooks.hpp"
#include "symbols/real_symbol.hpp"

namespace {

using sonde::DType;
namespace blas = sonde::blas;

// Sampled calls are rare (one in 64 per thread): shared counters cost nothing noticeable.
std::atomic<uint64_t> g_sampled_calls{0}, g_flagged_calls{0}, g_sampled_values{0},
    g_subnormal_values{0}, g_product_calls{0};

void describe_subnormals(sonde::InfoEmit emit, void* ctx) {
  auto s = sonde::blas::subnormal_stats();
  if (s.sampled_calls == 0) return;
  emit("blas.subnormal.sampled_calls", std::to_string(s.sampled_calls).c_str(), ctx);
  emit("blas.subnormal.flagged_calls", std::to_string(s.flagged_calls).c_str(), ctx);
  emit("blas.subnormal.sampled_values", std::to_string(s.sampled_values).c_str(), ctx);
  emit("blas.subnormal.values", std::to_string(s.subnormal_values).c_str(), ctx);
  emit("blas.subnormal.product_calls", std::to_string(s.product_calls).c_str(), ctx);
  if (s.product_calls > 0)
    sonde::add_note("denormals",
                    "sampled GEMM calls multiplied operands whose products are subnormal "
                    "(denormal: the largest sampled elements of A and B multiply under the "
                    "smallest normal number; counts: run_info blas.subnormal.product_calls); "
                    "arithmetic on them is slow unless FTZ/DAZ is on");
  if (s.subnormal_values > 0) {
    // One stable sentence (notes are deduplicated); the counts are in run_info.
    sonde::add_note("denormals",
                    "subnormal (denormal) values were found in sampled GEMM operands (counts: "
                    "run_info blas.subnormal.*); arithmetic on them is slow unless FTZ/DAZ is on");
  }
}

// How the BLAS tells its thread count, where it does: OpenBLAS, MKL, BLIS; OpenBLAS under the
// names of pip's numpy wheels (openblas64_: suffix 64_) and of the scipy-openblas wheels
// (prefix scipy_, and 64_ for the ILP64 build).
constexpr const char* kThreadQueries[] = {
    "openblas_get_num_threads",          "mkl_get_max_threads",
    "bli_thread_get_num_threads",        "openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads"};
constexpr const char* kConfigQueries[] = {"openblas_get_config", "openblas_get_config64_",
                                          "scipy_openblas_get_config64_",
                                          "scipy_openblas_get_config"};
using ThreadsFn = int (*)();

// The thread query of the library behind `routine`, asked in that library's own scope.
ThreadsFn thread_query_of(const void* routine) {
  for (const char* name : kThreadQueries) {
    if (auto fn = reinterpret_cast<ThreadsFn>(sonde::symbol_beside(routine, name))) return fn;
  }
  return nullptr;
}

// 0: not looked up yet; 1: the BLAS has no thread query; else the query.
std::atomic<uintptr_t> g_thread_query{0};

// The query of the BLAS behind the first resolved routine, looked up once; 0 while no routine
// is resolved, 1 when that BLAS has none.
uintptr_t thread_query() {
  uintptr_t q = g_thread_query.load(std::memory_order_acquire);
  if (q != 0) return q;
  auto first = sonde::blas::first_resolved();
  if (!first) return 0;
  ThreadsFn fn = thread_query_of(first->fn);
  q = fn ? reinterpret_cast<uintptr_t>(fn) : 1;
  g_thread_query.store(q, std::memory_order_release);
  return q;
}

}  // namespace

namespace sonde::blas {

// Threads the BLAS runs a call with: its own setting, asked at each shaped call (a load of a
// global in OpenBLAS, MKL and BLIS). A BLAS with no way to say (the reference BLAS) runs on the
// calling thread: 1. OpenBLAS runs GEMMs of m*n*k <= 262144 on one thread whatever its setting;
// that is not modelled (docs/metrics.md). 0: unknown.
uint16_t threads_now() {
  uintptr_t q = thread_query();
  if (q == 0) return 0;  // nothing resolved yet (cannot happen inside a call)
  int n = q == 1 ? 1 : reinterpret_cast<ThreadsFn>(q)();
  return n > 0 && n <= 65535 ? uint16_t(n) : 0;
}

}  // namespace sonde::blas

namespace {

// The BLAS the program really uses: the library behind the first resolved routine, and its
// thread count where the library says (OpenBLAS, MKL, BLIS).
void describe_blas(sonde::InfoEmit emit, void* ctx) {
  describe_subnormals(emit, ctx);
  auto first = sonde::blas::first_resolved();
  if (!first) {
    // The program never reached an interposed BLAS routine: say why when the reason is visible.
    static const bool static_blas = sonde::executable_defines("cblas_sgemm") ||
                                    sonde::executable_defines("sgemm_") ||
                                    sonde::executable_defines("cblas_dgemm");
    if (static_blas) {
      emit("blas.library", "(linked statically into the executable)", ctx);
      sonde::add_note("static-blas",
                      "the executable contains its own BLAS (linked statically): its BLAS calls "
                      "cannot be intercepted by LD_PRELOAD; link the shared libblas/libopenblas "
                      "to profile them");
    }
    return;
  }
  std::string lib = sonde::object_path_of(first->fn);
  emit("blas.library", lib.c_str(), ctx);
  emit("blas.first_routine", first->name, ctx);
  // The same query the shapes' thread counts come from.
  if (uintptr_t q = thread_query(); q > 1) {
    emit("blas.threads", std::to_string(reinterpret_cast<ThreadsFn>(q)()).c_str(), ctx);
  }
  for (const char* name : kConfigQueries) {
    if (auto cfg = reinterpret_cast<const char* (*)()>(sonde::symbol_beside(first->fn, name))) {
      emit("blas.config", cfg(), ctx);
      break;
    }
  }
}

__attribute__((constructor(200))) void register_blas_info() {
  sonde::register_info_provider(describe_blas);
}

}  // namespace

namespace sonde::blas {

namespace {

struct Table {
  RealSymbol* slots;
  const char* const* names;
  std::size_t count;
};
// Filled by the tables' constructors before main, read after: no lock.
std::array<Table, 4> g_tables{};
std::size_t g_table_count = 0;

}  // namespace

void add_table(RealSymbol* slots, const char* const* names, std::size_t count) {
  if (g_table_count < g_tables.size()) g_tables[g_table_count++] = {slots, names, count};
}

std::optional<Resolved> first_resolved() {
  for (std::size_t t = 0; t < g_table_count; ++t) {
    const Table& table = g_tables[t];
    for (std::size_t i = 0; i < table.count; ++i) {
      if (table.slots[i].resolved()) return Resolved{table.slots[i].any(), table.names[i]};
    }
  }
  return std::nullopt;
}

void record_subnormal_sample(uint64_t values, uint64_t subnormals, bool products) {
  g_sampled_calls.fetch_add(1, std::memory_order_relaxed);
  g_sampled_values.fetch_add(values, std::memory_order_relaxed);
  if (products) g_product_calls.fetch_add(1, std::memory_order_relaxed);
  if (subnormals > 0) {
    g_flagged_calls.fetch_add(1, std::memory_order_relaxed);
    g_subnormal_values.fetch_add(subnormals, std::memory_order_relaxed);
  }
}

SubnormalStats subnormal_stats() {
  return {g_sampled_calls.load(), g_flagged_calls.load(), g_sampled_values.load(),
          g_subnormal_values.load(), g_product_calls.load()};
}

}  // namespace sonde::blas
