#include "export/view_bundle.hpp"

#include <optional>
#include <set>

#include "advice/candidates.hpp"
#include "metrics/diff.hpp"
#include "metrics/loaded_profile.hpp"
#include "profile/call_tree.hpp"
#include "profile/run_summary.hpp"
#include "render/line_report.hpp"
#include "render/metrics_report.hpp"
#include "render/report.hpp"
#include "render/shapes.hpp"
#include "render/tree.hpp"

namespace sonde::analyzers {
namespace {

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// The plot's lines: each GEMM peak and the memory bandwidth at the thread count the BLAS ran
// with (the same lookup RoutineMetrics' % of peak uses), and the points as the metrics code
// computed them, routines and GEMM shapes.
Json roofline_json(const Metrics& m) {
  const RunFacts& f = m.facts;
  std::set<std::string> resources;
  for (const auto& [key, value] : f.peaks_at)
    if (key.first.starts_with("gemm.")) resources.insert(key.first);
  Json compute = Json::array();
  for (const std::string& r : resources)
    if (auto peak = f.peak_at(r, f.blas_threads))
      compute.push_back(Json{{"dtype", r.substr(5)}, {"gflops", *peak}});
  Json shapes = Json::array();
  for (const ShapeMetrics& s : m.shapes) {
    if (!s.perf.intensity || !s.perf.gflops) continue;  // no bytes or no time: no point
    shapes.push_back(Json{{"routine", s.routine},
                          {"call_site", s.call_site},
                          {"m", s.m}, {"n", s.n}, {"k", s.k},
                          {"dtype", s.dtype},
                          {"calls", s.calls},
                          {"time_s", static_cast<double>(s.time_ns) / 1e9},
                          {"gflops", opt(s.perf.gflops)},
                          {"pct_peak", opt(s.perf.pct_peak)},
                          {"intensity", opt(s.perf.intensity)},
                          {"attainable_gflops", opt(s.perf.attainable_gflops)},
                          {"threads", s.threads ? Json(*s.threads) : Json(nullptr)}});
  }
  return Json{{"threads", f.blas_threads ? Json(*f.blas_threads) : Json(nullptr)},
              {"compute", std::move(compute)},
              {"memory_gbs", opt(f.peak_at("mem.bw", f.blas_threads))},
              {"routines", render_json(roofline_table(m, 0))},
              {"shapes", std::move(shapes)}};
}

bool has_line_costs(const ProfileFile& file) {
  if (!file.has_table("line_costs")) return false;
  auto st = file.prepare("SELECT EXISTS (SELECT 1 FROM line_costs)");
  return st.step() && st.int64(0) != 0;
}

Json profile_json(const std::string& path) {
  ProfileFile file = ProfileFile::open(path);
  LoadedProfile profile(file);  // the trees and metrics loaded once for every member below
  Json p{{"path", path}};
  // run metadata and notes are in the report's "run" and "notes"
  p["report"] = render_report_json(path, profile.run(), compute_hotspots(file), 0);
  TreeOptions each{kViewTreeMinPct, std::nullopt, false};
  TreeOptions merged{kViewTreeMinPct, std::nullopt, true};
  const Forest& threads = profile.forest();
  p["tree"] = render_tree_json(threads, each);
  // One busy thread: the merged tree is the same tree again (a third of a torch_cnn bundle).
  if (threads.busy.size() > 1) {
    Forest all;  // what load_forest(file, true) gives, without loading the threads' trees again
    all.merged = true;
    all.merged_root = load_merged_tree(file);
    all.idle = threads.idle;
    p["tree_merged"] = render_tree_json(all, merged);
  } else {
    p["tree_merged"] = nullptr;
  }
  p["shapes"] = render_json(shapes_table(compute_shapes(file)));
  MetricsReport metrics = compute_metrics_report(profile, {});
  p["metrics"] = render_metrics_json(metrics, parse_metrics_sections("all"), 0);
  p["roofline"] = roofline_json(metrics.metrics);
  p["candidates"] = render_candidates_json(compute_candidates(profile), 0);
  // The bundle's objects lose their member order; the evidence is read in the rule's order.
  for (Json& c : p["candidates"]) {
    Json keys = Json::array();
    for (const auto& item : c["evidence"].items()) keys.push_back(item.key());
    c["evidence_keys"] = std::move(keys);
  }
  p["lines"] = has_line_costs(file) ? render_line_report_json(path, compute_line_costs(file))
                                    : Json(nullptr);
  return p;
}

}  // namespace

nlohmann::json make_view_bundle(const std::vector<std::string>& profiles) {
  Json bundle{{"format_version", kViewBundleFormat}};
  Json list = Json::array();
  for (const std::string& path : profiles) list.push_back(profile_json(path));
  bundle["profiles"] = std::move(list);
  bundle["diff"] = profiles.size() == 2
                       ? render_diff_json(profiles[0], profiles[1],
                                          compute_diff(ProfileFile::open(profiles[0]),
                                                       ProfileFile::open(profiles[1])))
                       : Json(nullptr);
  // Recorded names are bytes: dump_json replaces what is not UTF-8, so no later dump throws.
  return nlohmann::json::parse(dump_json(bundle, -1));
}

}  // namespace sonde::analyzers
