// The rank of a process of a parallel job, as its launcher tells it in the environment, before
// MPI_Init runs: the profile's file is chosen at start-up (prof.db -> prof.rank<R>.db) and ranks
// must never share one SQLite file. Header-only: libsonde and `sonde run` (which names the file
// its run wrote) decide alike. docs/distributed.md gives the rule.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace sonde {

struct RankEnv {
  int rank = -1;  // -1: not a ranked process
  int world_size = -1;
  int local_rank = -1;  // -1: unknown
  std::string source;   // the variable the rank came from
  std::string job;      // the same for every rank of one job (empty: unknown)
  bool worker = false;  // torchrun's worker (a scheme with requires_): a rank whatever it runs
  // -1, or: this process starts ranks of its own (sonde/rank_launcher.hpp) and is task
  // `outer_task` of an outer launcher's job (torchrun under srun): it is no rank, and its file
  // is prof.launcher<T>.db, neither a rank's nor another task's.
  int outer_task = -1;
};

namespace rank_env_detail {

inline int non_negative(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > (1L << 30)) return -1;
  return int(v);
}

}  // namespace rank_env_detail

// The launchers' variables, in the order they are read. torchrun's workers first (RANK and
// WORLD_SIZE where TORCHELASTIC_RUN_ID says torchrun set them): torchrun is the innermost
// launcher wherever it runs, its workers inheriting the variables of the srun or mpirun that
// started it, which name its node's task. Then Open MPI, PMI (MPICH, Intel MPI, srun --mpi),
// SLURM (more than one task: a batch script's single task is no parallel job), and RANK and
// WORLD_SIZE set by another hand. SLURM's tasks are often nodes, each running a launcher of its
// own that numbers its workers in RANK and WORLD_SIZE without torchrun's TORCHELASTIC_RUN_ID
// (DeepSpeed's launch.py under srun: every worker of a node read its node's SLURM_PROCID and
// shared its file): a later scheme numbering more ranks than an `outer` one's tasks is the
// worker's. (python_hook/options_gen.cpp prints it for the Python launcher, which prepares the
// file a rank writes before libsonde loads.)
struct RankScheme {
  const char *rank, *size, *local, *job, *job2;
  int min_size;
  const char* requires_;  // a variable that must be set too (nullptr: none)
  bool outer;             // a job's tasks, under which a launcher may number workers of its own
};
inline constexpr RankScheme kRankSchemes[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "MASTER_PORT", 1,
     "TORCHELASTIC_RUN_ID", false},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", 1, nullptr, false},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_KVS_NAME", "SLURM_JOB_ID", 1, nullptr, false},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", 2, nullptr,
     true},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "MASTER_PORT", 1, nullptr, false},
};

// `lookup` is getenv (or a test's table): the first scheme of kRankSchemes whose rank and size
// are numbers, the rank below the size, unless it is an outer one and a later scheme numbers
// more ranks. A rank not below its size is ignored.
template <class Lookup>
RankEnv detect_rank_env(Lookup lookup) {
  using rank_env_detail::non_negative;
  RankEnv outer;  // an outer scheme's task, while a later scheme may number more ranks
  for (const RankScheme& s : kRankSchemes) {
    if (s.requires_ != nullptr) {
      const char* v = lookup(s.requires_);
      if (v == nullptr || *v == '\0') continue;
    }
    int rank = non_negative(lookup(s.rank));
    int size = non_negative(lookup(s.size));
    if (rank < 0 || size < s.min_size || rank >= size) continue;
    if (outer.rank >= 0 && size <= outer.world_size) continue;
    RankEnv r;
    r.rank = rank;
    r.world_size = size;
    r.local_rank = non_negative(lookup(s.local));
    r.source = s.rank;
    r.worker = s.requires_ != nullptr;
    for (const char* name : {s.job, s.job2}) {
      const char* v = lookup(name);
      if (v != nullptr && *v != '\0') r.job += std::string(name) + "=" + v + ";";
    }
    if (!s.outer || outer.rank >= 0) return r;
    outer = r;
  }
  return outer;
}

}  // namespace sonde
