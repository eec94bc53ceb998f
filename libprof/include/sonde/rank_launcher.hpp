// Processes that start ranks of their own. Under an outer launcher (srun running torchrun on
// each node, mpirun in a SLURM batch step), such a process inherits the outer job's variables
// and read as that job's rank: torchrun's agent on node 1 took prof.rank1.db, which its global
// rank 1 (a worker on node 0) needed, and before torchrun's variables were read first every
// worker of a node shared its agent's file. Such a process is no rank: it writes
// prof.launcher<T>.db (T its task in the outer job), and its ranks write prof.rank<R>.db.
// Header-only: libsonde (from /proc/self/cmdline) and `sonde run` (from its command) decide
// alike. docs/distributed.md gives the rule.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "sonde/output_name.hpp"
#include "sonde/rank_env.hpp"
#include "sonde/run_options.hpp"

namespace sonde {

// The Python modules that start ranks, and the script of torchrun's entry point: what the
// Python launcher knows of its own program (python_hook/options_gen.cpp prints them for it).
inline constexpr std::string_view kLauncherModules[] = {"torch.distributed.run",
                                                        "torch.distributed.launch"};
inline constexpr std::string_view kLauncherScript = "torchrun";

namespace rank_launcher_detail {

inline std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

template <size_t N>
bool one_of(std::string_view word, const std::string_view (&words)[N]) {
  for (std::string_view w : words)
    if (w == word) return true;
  return false;
}

// An option of python3 -m sonde (python_hook/sonde/__main__.py's _VALUED) or of the
// interpreter's own that takes the next word as its value.
inline bool takes_value(std::string_view option, bool sonde) {
  if (option.find('=') != std::string_view::npos) return false;
  if (!sonde) return option == "-W" || option == "-X" || option == "--check-hash-based-pycs";
  static constexpr std::string_view kSondeValued[] = {"-o", "--output", "-s", "--sort", "--lines"};
  if (one_of(option, kSondeValued)) return true;
  for (const RunVariableOption& o : kRunVariableOptions)
    if (o.flag_value.empty() && o.flag == option) return true;
  return false;
}

}  // namespace rank_launcher_detail

// Whether a shell's command (its -c string, or the script it runs: the first 64 KB) runs a
// launcher: a word of kLauncherWords on a line that is no comment.
inline bool mentions_launcher(std::string_view text) {
  static constexpr std::string_view kLauncherWords[] = {
      "torchrun", "torch.distributed.run", "torch.distributed.launch", "mpirun", "mpiexec", "srun"};
  auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  };
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(line, end - line);
    size_t first = l.find_first_not_of(" \t");
    if (first != std::string_view::npos && l[first] != '#') {
      for (std::string_view w : kLauncherWords) {
        for (size_t at = l.find(w); at != std::string_view::npos; at = l.find(w, at + 1)) {
          size_t after = at + w.size();
          if ((at == 0 || !word_char(l[at - 1]) || l[at - 1] == '/') &&
              (after == l.size() || !word_char(l[after])))
            return true;
        }
      }
    }
    line = end + 1;
  }
  return false;
}

namespace rank_launcher_detail {

inline constexpr std::string_view kLaunchers[] = {"torchrun", "mpirun",        "mpiexec", "orterun",
                                                  "prterun",  "mpiexec.hydra", "srun"};

// Whether a shell runs a launcher: its -c string, or the script it runs (named like one: a
// torchrun wrapper; or its first 64 KB).
inline bool shell_runs_launcher(const std::vector<std::string>& args) {
  bool string_given = false;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-o" || a == "+o" || a == "-O" || a == "+O") {
      ++i;  // an option's name follows
    } else if (a == "--") {
      continue;
    } else if ((a.starts_with("-") || a.starts_with("+")) && a.size() > 1) {
      if (!a.starts_with("--") && a.find('c') != std::string_view::npos) string_given = true;
    } else if (string_given) {
      return mentions_launcher(a);
    } else {
      if (one_of(base_name(a), kLaunchers)) return true;
      std::string text;
      if (std::FILE* f = std::fopen(args[i].c_str(), "rb")) {
        text.resize(64 << 10);
        text.resize(std::fread(text.data(), 1, text.size(), f));
        std::fclose(f);
      }
      return mentions_launcher(text);
    }
  }
  return false;
}

}  // namespace rank_launcher_detail

// Whether `args` (a command line) starts ranks: torchrun (its script, or python3 -m
// torch.distributed.run or .launch, through python3 -m sonde's options), mpirun and its kin,
// srun, and a shell whose command runs one of them (srun bash -c 'torchrun ...', a train.sh).
inline bool launches_ranks(const std::vector<std::string>& args) {
  using namespace rank_launcher_detail;
  if (args.empty()) return false;
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh"};
  std::string_view program = base_name(args[0]);
  if (!program.empty() && program.front() == '-') program.remove_prefix(1);  // a login shell
  if (one_of(program, kLaunchers)) return true;
  if (one_of(program, kShells)) return shell_runs_launcher(args);
  if (!program.starts_with("python")) return false;
  bool sonde = false;  // past `-m sonde`: its own options, then its program
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a.starts_with("-m") || a.starts_with("-c")) {  // -m MODULE, -mMODULE; -c CMD
      if (a.starts_with("-c")) return false;
      std::string_view module = a.size() > 2          ? a.substr(2)
                                : i + 1 < args.size() ? std::string_view(args[++i])
                                                      : std::string_view();
      if (module == "sonde" && !sonde) {
        sonde = true;
        continue;
      }
      return one_of(module, kLauncherModules);
    }
    if (a == "--") return i + 1 < args.size() && base_name(args[i + 1]) == kLauncherScript;
    if (a.starts_with("-") && a != "-") {
      if (takes_value(a, sonde)) ++i;
      continue;
    }
    return base_name(a) == kLauncherScript;  // the script python runs
  }
  return false;
}

// This process's rank, running `args`: detect_rank_env's, but a process that starts ranks of
// its own is no rank of the outer job, only its task (RankEnv::outer_task). torchrun's worker
// is a rank whatever it runs (torchrun --no_python ./train.sh).
template <class Lookup>
RankEnv process_rank_env(Lookup lookup, const std::vector<std::string>& args) {
  RankEnv r = detect_rank_env(lookup);
  if (r.rank >= 0 && r.source != "RANK" && launches_ranks(args)) {
    r.outer_task = r.rank;
    r.rank = r.world_size = r.local_rank = -1;
  }
  return r;
}

// The file this process names for `path` asked for: its rank's, its launcher's, or `path`.
inline std::string own_output(const std::string& path, const RankEnv& r) {
  return r.rank >= 0         ? rank_output(path, r.rank)
         : r.outer_task >= 0 ? launcher_output(path, r.outer_task)
                             : path;
}

}  // namespace sonde
