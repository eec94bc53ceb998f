// Processes that start ranks of their own. Under an outer launcher (srun running torchrun on
// each node, mpirun in a SLURM batch step), such a process inherits the outer job's variables
// and read as that job's rank: torchrun's agent on node 1 took prof.rank1.db, which its global
// rank 1 (a worker on node 0) needed, and before torchrun's variables were read first every
// worker of a node shared its agent's file. Such a process is no rank: it writes
// prof.launcher<T>.db (T its task in the outer job), and its ranks write prof.rank<R>.db.
// Header-only: libsonde (from /proc/self/cmdline) and `sonde run` (from its command) decide
// alike. docs/distributed.md gives the rule.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "sonde/output_name.hpp"
#include "sonde/rank_env.hpp"
#include "sonde/run_options.hpp"

namespace sonde {

// The Python programs that start ranks, as modules (python3 -m torch.distributed.run) and as
// their entry points' scripts (torchrun), with the subcommand that does where the program has
// others (`accelerate launch`; `accelerate config` starts nothing): torch's, DeepSpeed's (its
// runner, and launch.py, which starts a node's workers), Accelerate's (torch's launcher run in
// its own process). What the Python launcher knows of its own program too
// (python_hook/options_gen.cpp prints them for it).
struct PythonLauncher {
  std::string_view name, subcommand;  // subcommand "": any
};
inline constexpr PythonLauncher kLauncherModules[] = {
    {"torch.distributed.run", ""},      {"torch.distributed.launch", ""},
    {"deepspeed.launcher.runner", ""},  {"deepspeed.launcher.launch", ""},
    {"accelerate.commands.launch", ""}, {"accelerate.commands.accelerate_cli", "launch"}};
inline constexpr PythonLauncher kLauncherScripts[] = {
    {"torchrun", ""}, {"deepspeed", ""}, {"accelerate", "launch"}};

// Whether `name` run with `args` after it is one of `launchers`.
template <size_t N>
bool is_python_launcher(const PythonLauncher (&launchers)[N], std::string_view name,
                        const std::vector<std::string>& args, size_t after) {
  for (const PythonLauncher& l : launchers)
    if (l.name == name &&
        (l.subcommand.empty() || (after < args.size() && args[after] == l.subcommand)))
      return true;
  return false;
}

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

inline bool launches_ranks(const std::vector<std::string>& args, int depth = 0);

namespace rank_launcher_detail {

inline constexpr std::string_view kLaunchers[] = {"mpirun",  "mpiexec",       "orterun",
                                                  "prterun", "mpiexec.hydra", "srun"};
inline constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh"};
// Commands that run the command after their own options as it is: `env X=1 torchrun`,
// `numactl -N 0 torchrun`, `#!/usr/bin/env bash` (env runs bash), `apptainer exec img torchrun`.
inline constexpr std::string_view kWrappers[] = {
    "env",  "nohup",  "nice", "numactl", "taskset", "stdbuf",    "timeout",
    "chrt", "ionice", "time", "setsid",  "exec",    "apptainer", "singularity"};
// Words a shell command may begin with before the command itself.
inline constexpr std::string_view kShellKeywords[] = {
    "if", "then", "else", "elif", "do", "while", "until", "!", "{", "command", "builtin"};

inline bool runs_programs(std::string_view program) {
  for (const PythonLauncher& l : kLauncherScripts)
    if (l.name == program) return true;
  return one_of(program, kLaunchers) || one_of(program, kShells) || program.starts_with("python") ||
         program.starts_with("pypy");
}

// A launcher's own name: mpirun and its kin, srun, or a Python launcher's script run as a
// command (its #! line read or not), its subcommand after it.
inline bool is_launcher_command(std::string_view program, const std::vector<std::string>& args,
                                size_t after) {
  return one_of(program, kLaunchers) || is_python_launcher(kLauncherScripts, program, args, after);
}

// The simple commands of a shell script, each as its words (a small part of the shell's
// grammar: quotes, backslashes, comments, and ; & | ( ) ` and newlines between commands), each
// without the assignments and keywords before it.
inline std::vector<std::vector<std::string>> shell_commands(std::string_view text) {
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto end_word = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  auto end_command = [&] {
    end_word();
    size_t first = 0;
    while (first < words.size() &&
           (one_of(words[first], kShellKeywords) ||
            (words[first].find('=') != std::string::npos && words[first].front() != '=' &&
             words[first].find_first_of("/\"'") > words[first].find('='))))
      ++first;
    if (first < words.size()) commands.emplace_back(words.begin() + first, words.end());
    words.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] != '\n') word += text[i + 1], in_word = true;
      ++i;
    } else if (c == '\'' || c == '"') {
      size_t close = text.find(c, i + 1);
      if (close == std::string_view::npos) close = text.size();
      word += text.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      end_word();
    } else if (c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '`') {
      end_command();
    } else {
      word += c;
      in_word = true;
    }
  }
  end_command();
  return commands;
}

// Up to 64 KB of a regular file: a shell's script. A pipe (bash <(...), a FIFO) is never
// read, or the shell would find its script gone.
inline std::string script_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    text.resize(64 << 10);
    text.resize(std::fread(text.data(), 1, text.size(), f));
    std::fclose(f);
  }
  return text;
}

// Whether a shell runs a launcher: a command of its -c string, or of the script it runs (or a
// script named like a launcher: a site's torchrun wrapper).
inline bool shell_runs_launcher(const std::vector<std::string>& args, int depth) {
  bool string_given = false;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--") continue;
    if ((a.starts_with("-") || a.starts_with("+")) && a.size() > 1 && !a.starts_with("--")) {
      if (a.find('c') != std::string_view::npos) string_given = true;
      if (a.back() == 'o' || a.back() == 'O') ++i;  // -o pipefail, -xo pipefail, -O extglob
      continue;
    }
    if (a.starts_with("--")) continue;  // --login, --norc, --posix
    std::string text = string_given ? args[i] : script_text(args[i]);
    if (!string_given && is_launcher_command(base_name(a), args, i + 1)) return true;
    for (const auto& command : shell_commands(text))
      if (launches_ranks(command, depth + 1)) return true;
    return false;
  }
  return false;
}

}  // namespace rank_launcher_detail

// Whether `args` (a command line) starts ranks: torchrun (its script, or python3 -m
// torch.distributed.run or .launch, through python3 -m sonde's options), mpirun and its kin,
// srun; a shell one of whose commands does (srun bash -c 'torchrun ...', a train.sh); and a
// wrapper (env, numactl, ...) around one of them.
inline bool launches_ranks(const std::vector<std::string>& args, int depth) {
  using namespace rank_launcher_detail;
  if (args.empty() || depth > 4) return false;
  std::string_view program = base_name(args[0]);
  if (!program.empty() && program.front() == '-') program.remove_prefix(1);  // a login shell
  if (is_launcher_command(program, args, 1)) return true;
  if (one_of(program, kShells)) return shell_runs_launcher(args, depth);
  if (one_of(program, kWrappers)) {
    for (size_t i = 1; i < args.size(); ++i)
      if (runs_programs(base_name(args[i])))
        return launches_ranks(std::vector<std::string>(args.begin() + i, args.end()), depth + 1);
    return false;
  }
  if (!program.starts_with("python") && !program.starts_with("pypy")) return false;
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
      return is_python_launcher(kLauncherModules, module, args, i + 1);
    }
    if (a == "--")
      return i + 1 < args.size() &&
             is_python_launcher(kLauncherScripts, base_name(args[i + 1]), args, i + 2);
    if (a.starts_with("-") && a != "-") {
      if (takes_value(a, sonde)) ++i;
      continue;
    }
    return is_python_launcher(kLauncherScripts, base_name(a), args, i + 1);  // python's script
  }
  return false;
}

// This process's rank, running `args`: detect_rank_env's, but a process that starts ranks of
// its own is no rank of the outer job, only its task (RankEnv::outer_task): under srun, or
// under a RANK set by hand per node (a Kubeflow PyTorchJob's pod running torchrun). torchrun's
// worker is a rank whatever it runs (torchrun --no_python ./train.sh).
template <class Lookup>
RankEnv process_rank_env(Lookup lookup, const std::vector<std::string>& args) {
  RankEnv r = detect_rank_env(lookup);
  if (r.rank >= 0 && !r.worker && launches_ranks(args)) {
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
