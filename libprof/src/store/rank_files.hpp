// The files a run's ranks wrote beside the launcher's own profile (prof.rank<R>.db,
// sonde/output_name.hpp), and the line and note that name them. Said by `sonde run` once its
// command has ended (analyzers/programs/launcher.cpp), and by libsonde at the exit of an
// in-process `python -m sonde` (runtime.cpp), where no launcher outlives the program: around
// torchrun, the launcher's file read as a second rank 0 ("both hold rank 0" to sonde merge).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sonde {

// The launcher file's note (read by analyzers/profile/launcher_file.hpp).
inline constexpr const char* kRankFilesTopic = "rank-files";

// A rank's file of the run, and the attempt it ran in: torchrun's restart count
// (TORCHELASTIC_RESTART_COUNT, run_info torch.restart_count), 0 where none was recorded. A job
// torchrun restarted (--max_restarts) writes a file per rank per attempt.
struct RankFile {
  long rank = 0;
  std::string name;
  long attempt = 0;
  // Its window note where the rank's collection window never opened (`--steps` of a region
  // the rank never began), else empty: a rank joins its run quietly, so its launcher says it.
  std::string window_unopened;
  bool operator==(const RankFile&) const = default;
};

// This run's ranks' files beside `output`, by rank: those holding a run id of `output`'s (the
// ranks inherit it, SONDE_RUN_ID), or where it holds none yet, a process started at or after
// `since_ns`. `others` counts the rank-named files that are not this run's.
std::vector<RankFile> rank_files_written(const std::string& output, int64_t since_ns, int& others);

struct RankFilesSaid {
  std::string line;  // for stderr, with its newline; empty where no rank wrote a file
  std::string note;  // for the launcher's own file
};

// `output`: the launcher's file as written; `requested`: as the user named it, which the line
// and the suggested merge show.
RankFilesSaid rank_files_said(const std::string& output, const std::string& requested,
                              int64_t since_ns);

// The note into the launcher's own file, where none of its processes has a rank (`sonde run`
// around one rank launches no others). A file another writer holds stays as it is.
void note_rank_files(const std::string& output, const std::string& message);

}  // namespace sonde
