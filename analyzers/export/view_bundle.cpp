// Placeholder bundle: each profile's `sonde report --format json` document.
#include "export/view_bundle.hpp"

#include "profile/run_summary.hpp"
#include "render/report.hpp"

namespace sonde::analyzers {

nlohmann::json make_view_bundle(const std::vector<std::string>& profiles) {
  nlohmann::json out = {{"format_version", 1}, {"profiles", nlohmann::json::array()}};
  for (const std::string& path : profiles) {
    ProfileFile file = ProfileFile::open(path);
    RunSummary run = load_run_summary(file);
    Hotspots hotspots = compute_hotspots(file);
    // ordered_json and json do not convert into each other; the text does.
    out["profiles"].push_back(
        nlohmann::json::parse(dump_json(render_report_json(path, run, hotspots, 0), -1)));
  }
  return out;
}

}  // namespace sonde::analyzers
