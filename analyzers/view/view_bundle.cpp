#include "view/view_bundle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "advice/candidates.hpp"
#include "metrics/diff.hpp"
#include "metrics/loaded_profile.hpp"
#include "metrics/ranks.hpp"
#include "profile/call_tree.hpp"
#include "profile/callers.hpp"
#include "profile/hotspots.hpp"
#include "profile/run_summary.hpp"
#include "render/callers.hpp"
#include "render/candidates.hpp"
#include "render/diff.hpp"
#include "render/line_report.hpp"
#include "render/metrics_report.hpp"
#include "render/ranks.hpp"
#include "render/report.hpp"
#include "render/samples.hpp"
#include "render/shapes.hpp"
#include "render/tree.hpp"
#include "sonde/routine_kinds.hpp"
#include "view/view_timeline.hpp"
#include "view/view_trees.hpp"

namespace sonde::analyzers {
namespace {

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json opt_int(const std::optional<std::int64_t>& v) { return v ? Json(*v) : Json(nullptr); }

// What a point is held against: its thread count and the peaks at that count.
void add_ceiling(Json& point, std::optional<std::int64_t> threads, const Roofline& perf) {
  point["threads"] = opt_int(threads);
  point["peak_gflops"] = opt(perf.peak_gflops);
  point["mem_bw_gbs"] = opt(perf.mem_bw_gbs);
}

// The plot's ceilings: for each thread count a plotted point ran with, the GEMM peak of each
// dtype held at that count and the memory bandwidth (peaks_at_threads, the lookup the points'
// % of peak uses); the BLAS thread count's, every dtype, where no point has a count. And the
// points as the metrics code computed them, routines and GEMM shapes, each with its count and
// peaks (a count of null: its calls ran with several, its peaks time-weighted, no line).
Json roofline_json(const Metrics& m) {
  const RunFacts& f = m.facts;
  auto plotted = [](const Roofline& r) { return r.intensity && r.gflops && *r.gflops > 0; };
  std::map<std::int64_t, std::set<std::string>> dtypes_at;  // thread count -> dtypes held there
  Json routines = render_json(roofline_table(m, 0));
  std::size_t row = 0;
  for (const RoutineMetrics& r : m.routines) {
    if (r.flops <= 0) continue;  // as roofline_table
    add_ceiling(routines[row++], r.threads, r.perf);
    if (plotted(r.perf) && r.threads) {
      auto& d = dtypes_at[*r.threads];
      if (r.perf.peak_gflops && !r.dtype.empty()) d.insert(r.dtype);
    }
  }
  Json shapes = Json::array();
  for (const ShapeMetrics& s : m.shapes) {
    if (!s.perf.intensity || !s.perf.gflops) continue;  // no bytes or no time: no point
    Json point{{"routine", s.routine},
               {"routine_id", s.routine_id},
               {"call_site", s.call_site},
               {"m", s.m},
               {"n", s.n},
               {"k", s.k},
               {"dtype", s.dtype},
               {"calls", s.calls},
               {"time_s", static_cast<double>(s.time_ns) / 1e9},
               {"gflops", opt(s.perf.gflops)},
               {"pct_peak", opt(s.perf.pct_peak)},
               {"intensity", opt(s.perf.intensity)},
               {"attainable_gflops", opt(s.perf.attainable_gflops)}};
    add_ceiling(point, s.threads, s.perf);
    if (plotted(s.perf) && s.threads) {
      auto& d = dtypes_at[*s.threads];
      if (s.perf.peak_gflops) d.insert(s.dtype);
    }
    shapes.push_back(std::move(point));
  }
  if (dtypes_at.empty() && f.blas_threads) {
    auto& d = dtypes_at[*f.blas_threads];
    for (const auto& [key, value] : f.peaks_at)
      if (key.first.starts_with("gemm.")) d.insert(key.first.substr(5));
  }
  Json ceilings = Json::array();
  for (const auto& [threads, dtypes] : dtypes_at) {
    Json compute = Json::array();
    for (const std::string& d : dtypes)
      if (auto peak = f.peak_at("gemm." + d, threads))
        compute.push_back(Json{{"dtype", d}, {"gflops", *peak}});
    ceilings.push_back(Json{{"threads", threads},
                            {"compute", std::move(compute)},
                            {"memory_gbs", opt(f.peak_at("mem.bw", threads))}});
  }
  return Json{{"blas_threads", opt_int(f.blas_threads)},
              {"ceilings", std::move(ceilings)},
              {"routines", std::move(routines)},
              {"shapes", std::move(shapes)}};
}

bool has_line_costs(const ProfileFile& file) {
  return file.has_table("line_costs") && file.has_rows("line_costs");
}

// The sampled paths shown at most (most samples first); `sonde tree` and CSV have them all.
constexpr std::size_t kViewSampleRows = 2000;

std::int64_t rank_count(const ProfileFile& file) {
  if (!file.has_table("rank_times")) return 0;
  auto st = file.prepare("SELECT COUNT(*) FROM rank_times");
  return st.step() ? st.int64(0) : 0;
}

// The ranks panel's per-routine bars carry the imbalance table's first routines, each with a
// time per rank: at most 256 routines, fewer past 1,024 ranks (a 4,096-rank run's 64 routines
// are 262,144 times, about 5 MB of JSON).
constexpr std::size_t kViewRankRoutines = 256;
constexpr std::int64_t kViewRankRoutineTimes = 1 << 18;

std::size_t rank_routines_shown(std::int64_t ranks) {
  return static_cast<std::size_t>(std::clamp<std::int64_t>(
      kViewRankRoutineTimes / std::max<std::int64_t>(ranks, 1), 16, kViewRankRoutines));
}

// One profile: its file, what several parts share, and each part's text once made.
struct Profile {
  std::string path;
  ProfileFile file;
  LoadedProfile loaded{file};
  std::optional<MetricsReport> metrics;
  std::optional<std::size_t> busy_threads;
  std::vector<ThreadTree> idle_threads;
  std::optional<TreeScopes> scopes;
  std::optional<Hotspots> hotspots;
  std::optional<CallerIndex> callers;
  std::optional<std::int64_t> nodes;
  std::map<std::string, std::shared_ptr<const std::string>, std::less<>> done;

  explicit Profile(std::string p) : path(std::move(p)), file(ProfileFile::open(path)) {
    file.check_tree_links();  // the callers panel and the trees walk the links
  }

  const TreeScopes& tree_scopes() {
    if (!scopes) scopes = list_tree_scopes(file);
    return *scopes;
  }
  // The rank or process whose merged tree the part named holds; null for another name.
  const TreeScope* scope_of(std::string_view part) {
    if (!part.starts_with("tree_rank_") && !part.starts_with("tree_process_")) return nullptr;
    for (const TreeScope& s : tree_scopes().scopes)
      if (s.part == part) return &s;
    return nullptr;
  }

  const Hotspots& hotspot_rows() {
    if (!hotspots) hotspots = compute_hotspots(file);
    return *hotspots;
  }
  // The hotspots row of the routine a "sandwich_<routine_id>" part names; null for another
  // name or a routine no busy thread called (its thread roots too: nothing calls them).
  const HotspotRow* sandwich_row(std::string_view part) {
    constexpr std::string_view prefix = "sandwich_";
    if (!part.starts_with(prefix) || part.size() == prefix.size() || part.size() > 30)
      return nullptr;
    std::int64_t id = 0;
    for (char c : part.substr(prefix.size())) {
      if (c < '0' || c > '9') return nullptr;
      id = id * 10 + (c - '0');
    }
    for (const HotspotRow& row : hotspot_rows().rows)
      if (row.routine_id == id) return row.kind == kinds::kRoot ? nullptr : &row;
    return nullptr;
  }
  // The routines whose sandwich the whole bundle carries: the hot-spot table's first rows.
  std::vector<std::string> sandwich_parts() {
    std::vector<std::string> parts;
    for (const HotspotRow& row : hotspot_rows().rows)
      if (row.kind != kinds::kRoot && parts.size() < kViewSandwichMax)
        parts.push_back(fmt::format("sandwich_{}", row.routine_id));
    return parts;
  }

  std::int64_t node_rows() {
    if (!nodes) {
      auto st = file.prepare("SELECT COUNT(*) FROM nodes");
      nodes = st.step() ? st.int64(0) : 0;
    }
    return *nodes;
  }

  MetricsReport& metrics_report() {
    if (!metrics) {
      metrics = compute_metrics_report(loaded, {});
      release_trees();
    }
    return *metrics;
  }
  // The thread trees are read by the metrics, the candidates and, in the whole bundle, the
  // tree (the other parts read the file): freed once all three are made.
  bool candidates_made = false, tree_made = false;
  void release_trees() {
    if (metrics && candidates_made && tree_made) loaded.release_forest();
  }

  // The parts written as JSON text without a document of them (their trees are the largest):
  // none for another part.
  std::optional<std::string> make_text(std::string_view name) {
    if (name != "tree" && name != "tree_first") return std::nullopt;
    // Only the frames the page can draw are built: the 1M-path benchmark's tree in 0.4 s of
    // SQLite instead of 6 s of loading every node.
    bool first = name == "tree_first";
    double min_pct = first ? kViewFirstTreeMinPct : kViewTreeMinPct;
    std::optional<int> depth = first ? std::optional(kViewFirstTreeDepth) : std::nullopt;
    if (!first && loaded.has_forest()) {
      // The whole bundle loads every node for the metrics anyway: the same frames, drawn
      // from those trees, without a second reading of the file (1.4 s of a 1M-path one).
      const Forest& forest = loaded.forest();
      busy_threads = forest.busy.size();
      idle_threads = forest.idle;
      std::string tree = render_tree_json_text(forest, TreeOptions{min_pct, depth, false});
      tree_made = true;
      release_trees();
      return tree;
    }
    Forest forest = load_forest_above(file, min_pct, depth);
    busy_threads = forest.busy.size();
    idle_threads = forest.idle;
    if (!first) tree_made = true;
    return render_tree_json_text(forest, TreeOptions{min_pct, depth, false});
  }

  Json make(std::string_view name) {
    if (name == "run") {
      const RunSummary& run = loaded.run();
      return Json{{"file", path}, {"run", run_summary_to_json(run)}, {"notes", notes_to_json(run)}};
    }
    if (name == "tree_merged") {
      if (!busy_threads) make("tree_first");  // the cheaper tree counts the same threads
      // One busy thread: the merged tree is the same tree again (a third of a torch_cnn bundle).
      if (*busy_threads < 2) return nullptr;
      Forest all;
      all.merged = true;
      all.merged_root = load_merged_tree(file);
      all.idle = idle_threads;
      return render_tree_json(all, TreeOptions{kViewTreeMinPct, std::nullopt, true});
    }
    if (name == "tree_scopes") return tree_scopes_json(tree_scopes());
    if (const TreeScope* scope = scope_of(name))
      return scope_tree_json(file, *scope, kViewTreeMinPct);
    if (const HotspotRow* row = sandwich_row(name)) {
      // `sonde tree --callers` and `--callees` of that routine, at the panel's threshold.
      if (!callers) callers.emplace(file);
      SandwichOptions at_threshold;
      at_threshold.min_pct = kViewSandwichMinPct;
      return render_sandwich_json(callers->sandwich(row->routine_id, at_threshold), *row,
                                  TreeOptions{kViewSandwichMinPct, std::nullopt, true});
    }
    if (name == "report") {
      // As `sonde report --format json` has it: the sampled section beside the exact rows.
      Json j = render_report_json(path, loaded.run(), hotspot_rows(), 0);  // read once
      j["sampled"] = render_samples_json(file);
      return j;
    }
    if (name == "shapes") {
      // Each row carries its routine's id, so the page selects it like the other panels.
      std::vector<ShapeRow> shapes = compute_shapes(file);
      Json rows = render_json(shapes_table(shapes));
      for (std::size_t i = 0; i < shapes.size(); ++i) rows[i]["routine_id"] = shapes[i].routine_id;
      return rows;
    }
    if (name == "metrics")
      return render_metrics_json(metrics_report(), parse_metrics_sections("all"), 0);
    if (name == "roofline") {
      return roofline_json(metrics_report().metrics);
    }
    if (name == "candidates") {
      Json list = render_candidates_json(compute_candidates(loaded), 0);
      candidates_made = true;
      release_trees();
      // The bundle's objects lose their member order; the evidence is read in the rule's order.
      for (Json& c : list) {
        Json keys = Json::array();
        for (const auto& item : c["evidence"].items()) keys.push_back(item.key());
        c["evidence_keys"] = std::move(keys);
      }
      return list;
    }
    if (name == "lines")
      return has_line_costs(file) ? render_line_report_json(path, compute_line_costs(file))
                                  : Json(nullptr);
    if (name == "samples")
      return file.has_table("samples") && file.has_rows("samples")
                 ? render_samples_json(file, kViewSampleRows)
                 : Json(nullptr);
    if (name == "ranks")  // a merged MPI run: more than one rank to compare
      return rank_count(file) > 1 ? render_ranks_json(path, compute_ranks(file, 0)) : Json(nullptr);
    if (name == "rank_routines") {
      std::int64_t ranks = rank_count(file);
      return ranks > 1 ? rank_routines_json(file, rank_routines_shown(ranks)) : Json(nullptr);
    }
    return nullptr;
  }
};

// The fixed parts; a rank's or process's tree is known once the profile lists it.
bool known_part(std::string_view name) {
  if (name == "tree_first" || name == "timeline" || name == "timeline_html") return true;
  for (std::string_view p : kViewParts)
    if (p == name) return true;
  return false;
}

std::string json_string(const std::string& s) { return dump_json(Json(s), -1); }

// The other profile a "tree_diff_<j>" part of `profile` is coloured against; none for another
// name, a profile not there, or the profile itself.
std::optional<std::size_t> diff_baseline(std::string_view part, std::size_t profile,
                                         std::size_t count) {
  constexpr std::string_view prefix = "tree_diff_";
  if (!part.starts_with(prefix) || part.size() == prefix.size() || part.size() > prefix.size() + 6)
    return std::nullopt;
  std::size_t j = 0;
  for (char c : part.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    j = j * 10 + static_cast<std::size_t>(c - '0');
  }
  if (j >= count || j == profile) return std::nullopt;
  return j;
}

}  // namespace

struct ViewData::Impl {
  std::mutex mutex;  // one part at a time: a file's connection and caches are not shared
  std::vector<std::unique_ptr<Profile>> profiles;
  std::optional<std::string> diff;
};

ViewData::ViewData(std::vector<std::string> paths) : impl_(std::make_unique<Impl>()) {
  for (std::string& path : paths)
    impl_->profiles.push_back(std::make_unique<Profile>(std::move(path)));
}

ViewData::~ViewData() = default;

std::string ViewData::index() const {
  Json list = Json::array();
  for (const auto& p : impl_->profiles) list.push_back(Json{{"path", p->path}});
  Json parts = Json::array();
  for (std::string_view p : kViewParts) parts.push_back(std::string(p));
  parts.push_back("timeline");
  return dump_json(Json{{"format_version", kViewBundleFormat},
                        {"profiles", std::move(list)},
                        {"diff", impl_->profiles.size() == 2},
                        {"parts", std::move(parts)}},
                   -1);
}

std::shared_ptr<const std::string> ViewData::part(std::size_t profile, std::string_view name) {
  if (profile >= impl_->profiles.size()) return nullptr;
  std::lock_guard lock(impl_->mutex);
  Profile& p = *impl_->profiles[profile];
  auto it = p.done.find(name);
  if (it != p.done.end()) return it->second;
  std::optional<std::size_t> baseline = diff_baseline(name, profile, impl_->profiles.size());
  if (!baseline && !known_part(name) && !p.scope_of(name) && !p.sandwich_row(name)) return nullptr;
  // Recorded names are bytes: dump_json replaces what is not UTF-8. The timeline's columns of
  // a million integers and the trees are written as text, not built as a document first.
  auto make = [&]() -> Json {
    if (!baseline) return p.make(name);
    const Profile& other = *impl_->profiles[*baseline];
    return diff_tree_json(p.file, other.file, other.path, kViewTreeMinPct);
  };
  std::optional<std::string> written = baseline ? std::nullopt : p.make_text(name);
  auto text = std::make_shared<const std::string>(
      written                   ? std::move(*written)
      : name == "timeline"      ? timeline_json(p.file, kViewTimelineEvents)
      : name == "timeline_html" ? timeline_json(p.file, kViewTimelineHtmlEvents)
                                : dump_json(make(), -1));
  p.done.emplace(std::string(name), text);
  return text;
}

void ViewData::prepare_first_panel() {
  try {
    part(0, "run");
    part(0, "tree_first");
    part(0, "tree_merged");  // null at once with one busy thread
    part(0, "tree_scopes");
  } catch (const std::exception&) {
  }
}

std::string ViewData::diff() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->diff) {
    const auto& ps = impl_->profiles;
    impl_->diff = ps.size() == 2
                      ? dump_json(render_diff_json(ps[0]->path, ps[1]->path,
                                                   compute_diff(ps[0]->file, ps[1]->file)),
                                  -1)
                      : "null";
  }
  return *impl_->diff;
}

bool ViewData::comparable(std::size_t a, std::size_t b) {
  std::lock_guard lock(impl_->mutex);
  const auto& ps = impl_->profiles;
  return ps.size() <= kViewComparedMax && ps[a]->node_rows() <= kViewComparedNodesMax &&
         ps[b]->node_rows() <= kViewComparedNodesMax;
}

void ViewData::whole(const std::function<void(std::string_view)>& write) {
  // The parts that read every node first, so that they share one load of the thread trees,
  // freed before the rest are made.
  for (std::size_t i = 0; i < impl_->profiles.size(); ++i)
    for (std::string_view name : {"metrics", "candidates", "tree"}) part(i, name);
  // The parts' own texts, one after the other: each is serialised once, and none is copied
  // into a document of them all.
  write(fmt::format("{{\"format_version\":{},\"profiles\":[", kViewBundleFormat));
  for (std::size_t i = 0; i < impl_->profiles.size(); ++i) {
    write(i ? ",{\"path\":" : "{\"path\":");
    write(json_string(impl_->profiles[i]->path));
    for (std::string_view name : kViewParts) {
      write(fmt::format(",\"{}\":", name));
      write(*part(i, name));
    }
    // The timeline, as far as the --html file's cap (the page says where it stops).
    write(",\"timeline\":");
    write(*part(i, "timeline_html"));
    // Each rank's and process's tree, under the part name "tree_scopes" gives it (two may
    // share one).
    std::set<std::string> scope_parts;
    std::vector<TreeScope> scopes;
    {
      std::lock_guard lock(impl_->mutex);
      scopes = impl_->profiles[i]->tree_scopes().scopes;
    }
    for (const TreeScope& s : scopes)
      if (scope_parts.insert(s.part).second) {
        write(fmt::format(",\"{}\":", s.part));
        write(*part(i, s.part));
      }
    // The callers and callees of the hot-spot table's first routines (the server makes any).
    std::vector<std::string> sandwiches;
    {
      std::lock_guard lock(impl_->mutex);
      sandwiches = impl_->profiles[i]->sandwich_parts();
    }
    std::size_t carried = 0;
    for (const std::string& name : sandwiches) {
      auto text = part(i, name);
      if (carried + text->size() > kViewSandwichBytes) break;
      carried += text->size();
      write(fmt::format(",\"{}\":", name));
      write(*text);
    }
    // The flame graph coloured against each other profile, where both are small enough.
    for (std::size_t j = 0; j < impl_->profiles.size(); ++j) {
      if (j == i || !comparable(i, j)) continue;
      write(fmt::format(",\"tree_diff_{}\":", j));
      write(*part(i, fmt::format("tree_diff_{}", j)));
    }
    write("}");
  }
  write("],\"diff\":");
  write(diff());
  write("}");
}

std::string ViewData::whole() {
  std::string out;
  whole([&out](std::string_view piece) { out += piece; });
  return out;
}

nlohmann::json make_view_bundle(const std::vector<std::string>& profiles) {
  return nlohmann::json::parse(ViewData(profiles).whole());
}

}  // namespace sonde::analyzers
