#include "metrics/breakdown.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

#include "profile/call_tree.hpp"
#include "advice/candidates.hpp"
#include "render/line_report.hpp"

namespace sonde::analyzers {
namespace {

using Words = std::string_view;
constexpr std::string_view kCommKinds[] = {"mpi", "nccl"};
constexpr Words kIoWords[] = {"data",  "dataset", "load",    "loader", "read", "fetch",
                              "prefetch", "collate", "batch", "batches", "io", "input", "inputs"};
constexpr Words kH2dWords[] = {"h2d", "htod"};
constexpr Words kForwardWords[] = {"forward", "fwd", "predict", "inference"};
constexpr Words kBackwardWords[] = {"backward", "bwd", "backprop", "grad", "grads", "gradient",
                                    "gradients"};
// The update class also takes every name looks_like_optimizer accepts (update_core_cpu, adamw).
constexpr Words kUpdateWords[] = {"update", "optimizer", "optimiser", "adam", "sgd"};
constexpr Words kCommWords[] = {"comm", "allreduce", "allgather", "broadcast", "communicate"};

// Order matters for names with words of several classes: the first class that matches wins.
const std::array<PhaseClass, 6> kClasses{{
    {"t_io", "data loading", {}, "", kIoWords},
    {"t_h2d", "host-to-device copies", {}, "HtoD", kH2dWords},
    {"t_f", "forward", {}, "", kForwardWords},
    {"t_b", "backward", {}, "", kBackwardWords},
    {"t_u", "update", {}, "", kUpdateWords},
    {"t_comm", "communication", kCommKinds, "", kCommWords},
}};
constexpr int kUpdate = 4;
constexpr int kNoClass = -1;
constexpr int kImport = -2;  // inside an import: nothing is classified

// "update_core_cpu" -> update, core, cpu; "loadBatch" -> load, batch; "h2d" stays one word.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  auto push = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (!std::isalnum(c)) {
      push();
      continue;
    }
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]))) push();
    cur += static_cast<char>(std::tolower(c));
  }
  push();
  return out;
}

bool named_phase_kind(const std::string& kind) { return kind == "region" || kind == "python"; }

struct Walker {
  const std::vector<PhaseMapping>& mappings;
  Breakdown& out;
  std::vector<std::map<std::string, std::int64_t>> opened;  // class -> routine -> time
  std::vector<std::int64_t> opening_calls;

  int kind_class(const CallNode& n) const {
    for (std::size_t i = 0; i < kClasses.size(); ++i) {
      const PhaseClass& c = kClasses[i];
      if (std::find(c.kinds.begin(), c.kinds.end(), n.kind) != c.kinds.end()) return int(i);
      if (!c.cuda_name_part.empty() && n.kind == "cuda" &&
          n.name.find(c.cuda_name_part) != std::string::npos)
        return int(i);
    }
    return -1;
  }

  int name_class(const CallNode& n) const {
    for (const PhaseMapping& m : mappings) {
      if (fnmatch(m.glob.c_str(), n.name.c_str(), 0) != 0 &&
          fnmatch(m.glob.c_str(), function_part(n.name).c_str(), 0) != 0)
        continue;
      for (std::size_t i = 0; i < kClasses.size(); ++i)
        if (kClasses[i].id == m.id) return int(i);
    }
    if (!named_phase_kind(n.kind)) return -1;
    std::string fn = n.kind == "python" ? function_part(n.name) : n.name;
    if (n.kind == "python") {
      // Import machinery (<frozen importlib._bootstrap>:..(_find_and_load)) and class bodies
      // (CamelCase by PEP 8: the body of class DataLoader runs once, at import) are no phase.
      if (n.name.starts_with("<") || fn.empty() ||
          std::isupper(static_cast<unsigned char>(fn[0])))
        return -1;
    }
    std::vector<std::string> words = words_of(fn);
    for (std::size_t i = 0; i < kClasses.size(); ++i) {
      for (const std::string& w : words)
        for (std::string_view c : kClasses[i].words)
          if (w == c) return int(i);
      if (int(i) == kUpdate && looks_like_optimizer(n.name)) return int(i);
    }
    return -1;
  }

  void open(int cls, const CallNode& n) {
    opened[cls][n.name] += n.incl_ns;
    opening_calls[cls] += n.calls;
  }

  void walk(const CallNode& n, int current) {
    int cls = current;
    if (int k = kind_class(n); k >= 0 && current != kImport) {
      // A copy or a collective is itself wherever it runs; what it calls is part of it.
      out.rows[k].time_ns += n.incl_ns;
      open(k, n);
      return;
    }
    if (n.kind == "python" && n.name.starts_with("<frozen importlib")) {
      // An import runs library code whose names mean nothing here (enum's _find_data_type_,
      // functools.update_wrapper): all of it is "other".
      cls = kImport;
    } else if (current == kNoClass) {
      cls = name_class(n);
      if (cls >= 0) open(cls, n);
    }
    (cls >= 0 ? out.rows[cls].time_ns : out.other_ns) += n.excl_ns;
    for (const CallNode& c : n.children) walk(c, cls);
  }
};

}  // namespace

std::span<const PhaseClass> phase_classes() { return kClasses; }

PhaseMapping parse_phase_mapping(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    throw Error(fmt::format("--phase wants CLASS=GLOB (e.g. t_io=next_batch), not '{}'", text), 2);
  std::string id(text.substr(0, eq));
  bool known = std::any_of(kClasses.begin(), kClasses.end(),
                           [&](const PhaseClass& c) { return c.id == id; });
  if (!known) {
    std::string ids;
    for (const PhaseClass& c : kClasses) ids += (ids.empty() ? "" : ", ") + std::string(c.id);
    throw Error(fmt::format("unknown phase class '{}' (one of {})", id, ids), 2);
  }
  return {id, std::string(text.substr(eq + 1))};
}

Breakdown compute_breakdown(const ProfileFile& file, const std::vector<PhaseMapping>& mappings) {
  Breakdown b;
  for (const PhaseClass& c : kClasses) b.rows.push_back({std::string(c.id), std::string(c.title), 0, {}});
  Walker w{mappings, b, std::vector<std::map<std::string, std::int64_t>>(kClasses.size()),
           std::vector<std::int64_t>(kClasses.size(), 0)};
  for (const ThreadTree& t : load_thread_trees(file)) {
    // A thread with nothing measured (an idle BLAS worker) would only add its whole life as
    // unmeasured time.
    if (t.root.children.empty()) continue;
    b.unmeasured_ns += t.root.excl_ns;
    for (const CallNode& c : t.root.children) w.walk(c, kNoClass);
  }
  for (std::size_t i = 0; i < kClasses.size(); ++i) {
    std::vector<std::pair<std::string, std::int64_t>> rs(w.opened[i].begin(), w.opened[i].end());
    std::stable_sort(rs.begin(), rs.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
    for (auto& [name, ns] : rs) b.rows[i].routines.push_back(name);
  }
  for (int cls : {kUpdate, 2}) {  // an iteration updates once; else it runs forward once
    if (w.opening_calls[cls] > 0) {
      b.iterations = w.opening_calls[cls];
      b.iterations_from = std::string(kClasses[cls].id);
      break;
    }
  }
  Metrics m = compute_metrics(file);
  b.run_ns = m.run_ns();
  return b;
}

Table breakdown_table(const Breakdown& b) {
  Table t;
  t.columns = {{"phase", "phase"},          {"what", "what"},
               {"time_s", "time_s", 3},      {"% run", "pct_run", 1},
               {"ms/iter", "ms_per_iter", 3}, {"from", "routines"}};
  auto row = [&](const std::string& id, const std::string& what, std::int64_t ns,
                 const std::vector<std::string>& routines) {
    Cell pct, per_iter;  // NULL unless known
    if (b.run_ns > 0) pct = 100.0 * static_cast<double>(ns) / static_cast<double>(b.run_ns);
    if (b.iterations > 0) per_iter = static_cast<double>(ns) / 1e6 / static_cast<double>(b.iterations);
    std::vector<Cell> r{id, what, static_cast<double>(ns) / 1e9, pct, per_iter};
    std::string from;
    for (std::size_t i = 0; i < routines.size() && i < 3; ++i) from += (i ? ", " : "") + routines[i];
    if (routines.size() > 3) from += fmt::format(" (+{})", routines.size() - 3);
    r.emplace_back(from);
    t.rows.push_back(std::move(r));
  };
  for (const BreakdownRow& r : b.rows) row(r.id, r.title, r.time_ns, r.routines);
  row("other", "measured, in no phase", b.other_ns, {});
  row("unmeasured", "outside any measured routine", b.unmeasured_ns, {});
  return t;
}

}  // namespace sonde::analyzers
