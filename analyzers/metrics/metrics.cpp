#include "metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "profile/call_tree.hpp"
#include "profile/hotspots.hpp"
#include "profile/run_summary.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

// The roofline's columns, as gemm_shapes and routine_metrics name them (their one definition).
constexpr const char* kRooflineColumns =
    "gflops, pct_peak, intensity, attainable_gflops, bound, peak_gflops, mem_bw_gbs";

Roofline read_roofline(const Statement& st, int first) {
  auto opt = [&](int col) -> std::optional<double> {
    if (st.is_null(first + col)) return std::nullopt;
    return st.real(first + col);
  };
  Roofline r{opt(0), opt(1), opt(2), opt(3), std::nullopt, opt(5), opt(6)};
  if (!st.is_null(first + 4)) r.bound = st.text(first + 4);
  return r;
}

// A routine is its identity (routines.routine_id: kind, library or file, line, name), never its
// display name: two `__init__.py:1(<module>)` are two routines.
using Key = std::int64_t;

bool is_library_call(const std::string& kind) {
  return kind == kinds::kBlas || kind == kinds::kOnednn;
}

struct Under {
  double flops = 0;
  std::int64_t blas_ns = 0;
};

// Adds each node's flops (and the time of outermost library calls) to every distinct routine on
// its path, itself included: a routine's "under" figures, recursion counted once. That is the
// subtree sums of the routine's outermost occurrences, added up bottom-up in one pass (a set of
// the path's routines at every node took 271 s on the benchmark's 1M-node, 429-deep tree).
// Returns what the tree holds: flops, and the time of outermost library calls in it. Walked
// with a stack of its own, not the call stack (a 65,536-deep path).
// `open` counts the frames of each routine on the path, by routine id (the file's row ids: a
// vector, grown to the largest met, is a tenth of a hash map's cost per node).
// A fork child's inherited frames (the view inherited_frames: the calls open in its parent as it
// forked) are no frames of its routines here: hotspots leaves the child's life out of their
// inclusive time, so the work under them is left out of their routines' too (a Pool() read
// 1,771 GFLOP/s and 5,232 % of its time in BLAS, its workers' GEMMs over its own 9 ms).
Under walk(const CallNode& root, std::vector<int>& open, std::unordered_map<Key, Under>& under,
           const std::unordered_set<std::int64_t>& inherited) {
  struct Frame {
    const CallNode* node;
    bool in_library;  // under a library call
    bool library;     // a library call itself
    bool outermost;   // no other frame of its routine above it
    bool counted;     // a frame of its routine (not inherited)
    Under below;
    std::size_t next = 0;  // the child to visit next
  };
  std::vector<Frame> stack;
  auto open_of = [&](Key id) -> int& {
    auto i = static_cast<std::size_t>(std::max<Key>(id, 0));
    if (i >= open.size()) open.resize(i + 1, 0);
    return open[i];
  };
  auto enter = [&](const CallNode& n, bool in_library) {
    bool counted = inherited.empty() || !inherited.count(n.node_id);
    bool outermost = counted && open_of(n.routine_id)++ == 0;
    stack.push_back({&n, in_library, is_library_call(n.kind), outermost, counted, {}, 0});
  };
  enter(root, false);
  Under total;
  while (!stack.empty()) {
    Frame& f = stack.back();
    const CallNode& node = *f.node;
    const bool library = f.library;
    if (f.next < node.children.size()) {
      enter(node.children[f.next++], f.in_library || library);
      continue;
    }
    if (f.counted) --open_of(node.routine_id);
    if (f.outermost) {
      Under& u = under[node.routine_id];
      u.flops += node.flops + f.below.flops;
      u.blas_ns += f.below.blas_ns;  // a library call's own time is not "under" it
    }
    Under mine{node.flops + f.below.flops,
               library && !f.in_library ? node.incl_ns : f.below.blas_ns};
    stack.pop_back();
    Under& into = stack.empty() ? total : stack.back().below;
    into.flops += mine.flops;
    into.blas_ns += mine.blas_ns;
  }
  return total;
}

// The launchers' count of the ranks on this rank's host, as recorded in run_info's env.*.
constexpr const char* kLocalSizeVariables[] = {"env.OMPI_COMM_WORLD_LOCAL_SIZE",
                                               "env.LOCAL_WORLD_SIZE", "env.MPI_LOCALNRANKS"};

std::int64_t ranks_on_host(const ProfileFile& file,
                           const std::map<std::string, std::string>& info) {
  std::int64_t most = 1;
  // rank_times: one row per rank of the file, with its host.
  if (auto st = file.prepare("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM rank_times "
                             "GROUP BY host)");
      st.step() && !st.is_null(0))
    most = std::max(most, st.int64(0));
  if (auto st = file.prepare("SELECT MAX(local_rank) + 1 FROM processes");
      st.step() && !st.is_null(0))
    most = std::max(most, st.int64(0));
  for (const char* key : kLocalSizeVariables) {
    auto it = info.find(key);
    if (it == info.end()) continue;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end != it->second.c_str() && *end == '\0' && v > 0) most = std::max<std::int64_t>(most, v);
  }
  return most;
}

}  // namespace

std::optional<std::int64_t> RunFacts::available_cores() const {
  std::optional<std::int64_t> n;
  if (affinity_cores && *affinity_cores > 0)
    n = affinity_cores;
  else if (cores && *cores > 0)
    n = cores;
  // Rounded down from three quarters of a core: a pod's 3900m is 4 cores' threads, its 2500m
  // 2 (a third thread past 2.5 cores stops the cgroup at every period's end).
  if (n && cpu_quota && *cpu_quota > 0)
    n = std::min(*n, std::max<std::int64_t>(1, static_cast<std::int64_t>(*cpu_quota + 0.25)));
  return n;
}

bool RunFacts::quota_binds() const {
  std::optional<std::int64_t> mask = affinity_cores && *affinity_cores > 0 ? affinity_cores : cores;
  auto n = available_cores();
  return cpu_quota && mask && n && *n < *mask;
}

std::optional<std::int64_t> RunFacts::cores_per_rank() const {
  auto cores = available_cores();
  if (!cores) return std::nullopt;
  return std::max<std::int64_t>(1, *cores / std::max<std::int64_t>(1, ranks_on_host));
}

std::string RunFacts::peak_word(std::string_view resource) const {
  auto it = peak_sources.find(std::string(resource));
  if (it == peak_sources.end() || it->second == "calibrated") return "calibrated";
  if (it->second == "manual") return "hand-set";
  return it->second;
}

std::string RunFacts::peak_word(std::initializer_list<std::string_view> resources) const {
  std::string word;
  for (std::string_view r : resources) {
    std::string w = peak_word(r);
    if (!word.empty() && w != word) return "given";
    word = w;
  }
  return word;
}

std::optional<double> RunFacts::peak_at(std::string_view resource,
                                        std::optional<std::int64_t> threads) const {
  if (!threads) return std::nullopt;
  auto it = peaks_at.find({std::string(resource), *threads});
  if (it == peaks_at.end() || !(it->second > 0)) return std::nullopt;
  return it->second;
}

RunFacts load_run_facts(const ProfileFile& file) {
  RunFacts f;
  std::int64_t run_id = 0;
  {
    auto st =
        file.prepare("SELECT run_id, cores, affinity_cores FROM runs ORDER BY run_id LIMIT 1");
    if (st.step()) {
      run_id = st.int64(0);
      if (!st.is_null(1)) f.cores = st.int64(1);
      if (!st.is_null(2)) f.affinity_cores = st.int64(2);
    }
  }
  {
    // Read so that the row that must win comes last: run-wide, else the root process.
    auto st = file.prepare(kRunInfoLastWinsSql);
    st.bind(1, run_id);
    while (st.step()) f.info[st.text(0)] = st.text(1);
  }
  auto get = [&](const char* key) -> std::optional<std::string> {
    auto it = f.info.find(key);
    if (it == f.info.end()) return std::nullopt;
    return it->second;
  };
  f.blas_library = get("blas.library");
  f.fpu_ftz = get("fpu.ftz");
  f.fpu_daz = get("fpu.daz");
  f.ranks_on_host = ranks_on_host(file, f.info);
  if (auto q = get("cpu.quota")) {
    char* end = nullptr;
    double v = std::strtod(q->c_str(), &end);
    if (end != q->c_str() && v > 0) f.cpu_quota = v;
  }
  if (auto t = get("blas.threads")) {
    char* end = nullptr;
    long long v = std::strtoll(t->c_str(), &end, 10);
    if (end != t->c_str() && *end == '\0' && v > 0) f.blas_threads = v;
  }
  {
    auto st = file.prepare("SELECT resource, threads, value, source FROM peaks WHERE run_id = ?");
    st.bind(1, run_id);
    while (st.step()) {
      f.peaks[{st.text(0), st.int64(1)}] = st.real(2);
      std::string& source = f.peak_sources[st.text(0)];
      if (source.empty() || source == "calibrated") source = st.text(3);
    }
  }
  {
    auto st = file.prepare(
        "SELECT resource, threads, value FROM peaks_at_threads "
        "WHERE run_id = ? AND value IS NOT NULL");
    st.bind(1, run_id);
    while (st.step()) f.peaks_at[{st.text(0), st.int64(1)}] = st.real(2);
  }
  return f;
}

std::string share_base_text(const Metrics& m) {
  if (m.share_base_ns() == m.total_ns || m.setup_ns <= 0) return "";
  return fmt::format(
      "shares are of the busy threads' time outside set-up: {:.3f} s of {:.3f} s (the {:.3f} s "
      "of imports, the interpreter's start-up and teardown and communication set-up left out)",
      1e-9 * double(m.share_base_ns()), 1e-9 * double(m.total_ns), 1e-9 * double(m.setup_ns));
}

Metrics compute_metrics(const ProfileFile& file) {
  return compute_metrics(file, load_thread_trees(file));
}

Metrics compute_metrics(const ProfileFile& file, const std::vector<ThreadTree>& trees) {
  Metrics m;
  m.facts = load_run_facts(file);
  Hotspots h = compute_hotspots(file, ReportSort::kInclusive);
  m.total_ns = h.total_ns;
  {
    // The run's wall time is run_totals' (its one definition), not a MIN/MAX of our own.
    auto st = file.prepare("SELECT wall_s FROM run_totals");
    if (st.step() && !st.is_null(0) && st.real(0) > 0) m.wall_ns = std::llround(st.real(0) * 1e9);
  }
  {
    auto st = file.prepare("SELECT setup_s FROM setup_time");
    if (st.step() && !st.is_null(0)) m.setup_ns = std::llround(st.real(0) * 1e9);
  }

  std::unordered_set<std::int64_t> inherited;
  for (auto st = file.prepare("SELECT node_id FROM inherited_frames"); st.step();)
    inherited.insert(st.int64(0));
  std::unordered_map<Key, Under> under;
  for (const ThreadTree& t : trees) {
    std::vector<int> open;
    walk(t.root, open, under, inherited);
  }

  // Shapes: the gemm_shapes view's rows and figures, as `sonde shapes` prints them.
  {
    auto st = file.prepare(
        "SELECT routine, call_site, m, n, k, dtype, calls, time_s, flops, bytes, threads, "
        "routine_id, " +
        std::string(kRooflineColumns) + " FROM gemm_shapes");
    while (st.step()) {
      ShapeMetrics s;
      s.routine = st.text(0);
      s.call_site = st.text(1);
      s.m = st.int64(2);
      s.n = st.int64(3);
      s.k = st.int64(4);
      s.dtype = st.text(5);
      s.calls = st.int64(6);
      s.time_ns = std::llround(st.real(7) * 1e9);
      s.flops = st.real(8);
      s.bytes = st.real(9);
      if (!st.is_null(10)) s.threads = st.int64(10);
      s.routine_id = st.int64(11);
      s.perf = read_roofline(st, 12);
      m.shapes.push_back(std::move(s));
    }
  }
  std::stable_sort(m.shapes.begin(), m.shapes.end(),
                   [](const ShapeMetrics& a, const ShapeMetrics& b) {
                     if (a.time_ns != b.time_ns) return a.time_ns > b.time_ns;
                     return std::tie(a.routine, a.call_site, a.m, a.n, a.k) <
                            std::tie(b.routine, b.call_site, b.m, b.n, b.k);
                   });

  // Per routine: its cost model's figures, dtype, thread count and roofline, as the
  // routine_metrics view defines them.
  struct Figures {
    double flops = 0, bytes = 0;
    std::string dtype;
    std::optional<std::int64_t> threads;
    Roofline perf;
  };
  std::map<Key, Figures> figures;
  {
    auto st = file.prepare("SELECT routine_id, flops, bytes, dtype, threads, " +
                           std::string(kRooflineColumns) + " FROM routine_metrics");
    while (st.step()) {
      Figures f;
      f.flops = st.real(1);
      f.bytes = st.real(2);
      if (!st.is_null(3)) f.dtype = st.text(3);
      if (!st.is_null(4)) f.threads = st.int64(4);
      f.perf = read_roofline(st, 5);
      figures.emplace(st.int64(0), std::move(f));
    }
  }

  for (const HotspotRow& row : h.rows) {
    if (row.kind == kinds::kRoot) {
      m.unmeasured_ns += row.excl_ns;
      continue;
    }
    RoutineMetrics r;
    r.routine_id = row.routine_id;
    r.name = row.name;
    r.kind = row.kind;
    r.library = row.library;
    r.calls = row.calls;
    r.incl_ns = row.incl_ns;
    r.excl_ns = row.excl_ns;
    r.pct_total = row.pct_time;
    if (auto it = figures.find(row.routine_id); it != figures.end()) {
      r.flops = it->second.flops;
      r.bytes = it->second.bytes;
      r.dtype = it->second.dtype;
      r.threads = it->second.threads;
      r.perf = it->second.perf;
    }
    if (auto it = under.find(row.routine_id); it != under.end()) {
      r.flops_under = it->second.flops;
      r.blas_under_ns = it->second.blas_ns;
    }
    if (r.incl_ns > 0) {
      r.gflops_under = r.flops_under / static_cast<double>(r.incl_ns);
      r.blas_pct = 100.0 * static_cast<double>(r.blas_under_ns) / static_cast<double>(r.incl_ns);
    }
    m.routines.push_back(std::move(r));
  }
  return m;
}

std::vector<const RoutineMetrics*> phases(const Metrics& metrics) {
  std::vector<const RoutineMetrics*> out;
  for (const auto& r : metrics.routines)
    if (r.kind == kinds::kRegion || r.kind == kinds::kPython) out.push_back(&r);
  return out;
}

std::vector<std::string> peaks_exceeded(const ProfileFile& file) {
  constexpr double kOver = 105;  // % of peak: above the calibration's own spread
  std::vector<std::string> out;
  std::set<std::string> said;
  auto st = file.prepare(
      "SELECT s.dtype, s.routine, s.m, s.n, s.k, s.gflops, s.pct_peak, s.threads "
      "FROM gemm_shapes s WHERE s.pct_peak > ? ORDER BY s.pct_peak DESC");
  st.bind(1, kOver);
  std::optional<RunFacts> facts;
  while (st.step()) {
    std::string dtype = st.text(0);
    if (!said.insert(dtype).second) continue;
    if (!facts) facts = load_run_facts(file);
    std::string word = facts->peak_word("gemm." + dtype);
    double peak = st.real(5) / st.real(6) * 100.0;
    out.push_back(fmt::format(
        "{} {}x{}x{} ran at {:.1f} GFLOP/s, {:.0f} % of the {} gemm.{} peak for {} thread{} "
        "({:.1f} GFLOP/s): the peaks are not this machine's, and every figure held against "
        "them (% of peak, roofline, gain bounds) with them; sonde calibrate measures them",
        st.text(1), st.int64(2), st.int64(3), st.int64(4), st.real(5), st.real(6), word, dtype,
        st.is_null(7) ? 0 : st.int64(7), !st.is_null(7) && st.int64(7) == 1 ? "" : "s", peak));
  }
  return out;
}

}  // namespace sonde::analyzers
