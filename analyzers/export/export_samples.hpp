// The sampler's stacks (SONDE_SAMPLE_HZ) for the exports: always apart from the exact figures,
// in a file, profile or track of their own whose name says "sampled".
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "export/json_sink.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// One row of `sampled_paths`: the shadow-stack path (routine ids, root first, no thread root)
// and the native frames below it (outermost first), with its samples.
struct SampledStack {
  std::int64_t thread_id = 0;
  std::vector<std::int64_t> routines;
  std::vector<std::string> frames;
  std::int64_t count = 0;
};

// Empty when the run was not sampled or the file predates the sampler.
std::vector<SampledStack> sampled_stacks(const ProfileFile& file);
// The sampling rate per thread (run_info sample.hz); 0 when unknown.
double sample_hz(const ProfileFile& file);

// A name as one folded-stack frame (';' escaped, control bytes shown, never empty).
std::string folded_frame(const std::string& name);

// Folded stacks of the samples alone: path;native frames, value = samples (never microseconds:
// a flame-graph tool would add them to the exact figures' if they shared a file).
void write_folded_samples(const ProfileFile& file, std::ostream& out);

// `sonde export --format samples`: the `sampled_callpaths` view as JSON (shape in docs/cli.md).
void write_samples_json(const ProfileFile& file, std::ostream& out);

// Chrome: per sampled thread, a track of its own (tid + kSampledTrack, named "<thread>
// [sampled]") laying its sampled tree out as a flame chart: widths = samples x the period, from
// 0 (an aggregate, not a timeline). `labels`: thread_id -> its pid, tid and name; `add` takes
// each event, a JSON object.
constexpr std::int64_t kSampledTrack = std::int64_t(1) << 30;
struct ThreadLabel {
  std::int64_t pid = 0, tid = 0;
  std::string name;
};
void write_sampled_tracks(const ProfileFile& file,
                          const std::unordered_map<std::int64_t, ThreadLabel>& labels,
                          const std::function<void(const std::string&)>& add);

}  // namespace sonde::analyzers
