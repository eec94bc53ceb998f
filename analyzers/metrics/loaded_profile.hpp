// One profile file and what several analyzers read from it, each loaded on first use and then
// shared: the thread trees, the metrics, the GPU summary and the run summary. `sonde metrics`,
// `sonde candidates` and the viewer's bundle each loaded the trees of a file several times (the
// bundle seven, 64 s of its 1M-path benchmark); what they compute from them is unchanged.
#pragma once

#include <memory>
#include <optional>

#include "metrics/gpu_summary.hpp"
#include "metrics/metrics.hpp"
#include "profile/call_tree.hpp"
#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"

namespace sonde::analyzers {

struct Breakdown;  // metrics/breakdown.hpp, which includes this

class LoadedProfile {
 public:
  // `file` must outlive this object.
  explicit LoadedProfile(const ProfileFile& file) : file_(&file) {}

  const ProfileFile& file() const { return *file_; }
  const Forest& forest();  // one tree per thread (not merged), busy and idle apart
  const Metrics& metrics();
  const GpuSummary& gpu();
  const RunSummary& run();
  // The iteration breakdown with no phase mappings (defined in breakdown.cpp): the metrics'
  // section and the candidates' data-loading rule read one walk.
  const Breakdown& breakdown();
  // Frees the trees (a 1M-node file's are most of a view bundle's memory) once whatever reads
  // them has been made; forest() loads them again if asked.
  void release_forest() { forest_.reset(); }
  bool has_forest() const { return forest_.has_value(); }

 private:
  const ProfileFile* file_;
  std::optional<Forest> forest_;
  std::optional<Metrics> metrics_;
  std::optional<GpuSummary> gpu_;
  std::optional<RunSummary> run_;
  std::shared_ptr<const Breakdown> breakdown_;
};

}  // namespace sonde::analyzers
