#include "programs/launcher.hpp"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/executable_dir.hpp"
#include "base/output_file.hpp"
#include "base/signal_name.hpp"
#include "profile/launcher_file.hpp"
#include "profile/process_alive.hpp"
#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"
#include "programs/previous_profile.hpp"
#include "programs/python_package.hpp"
#include "render/report.hpp"
#include "sonde/options.hpp"
#include "sonde/output_name.hpp"
#include "sonde/preload_path.hpp"
#include "sonde/quiet_write.hpp"
#include "sonde/rank_launcher.hpp"
#include "sonde/run_options.hpp"
#include "sonde/signals.hpp"
#include "store/rank_files.hpp"

namespace sonde::analyzers {
namespace fs = std::filesystem;
namespace {

// sonde run's stderr and stdout are its command's: a closed descriptor or a pipe whose reader
// has gone must not end sonde run (by SIGPIPE, or by fmt's exception when SIGPIPE is ignored)
// and change the exit status of a command that ended well.
template <class... A>
void say(fmt::format_string<A...> f, A&&... args) {
  quiet_write(STDERR_FILENO, fmt::format(f, std::forward<A>(args)...));
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Why `name` cannot be run when it is there but not executable (126, as a shell says), or
// nothing when it is not there at all (127).
std::optional<std::string> cannot_execute(const std::string& name) {
  auto why = [](const std::string& path) -> std::optional<std::string> {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    if (S_ISDIR(st.st_mode)) return fmt::format("{}: Is a directory", path);
    return fmt::format("{}: Permission denied", path);
  };
  if (name.find('/') != std::string::npos) return why(name);
  const char* env = std::getenv("PATH");
  std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t end = std::min(path.find(':', start), path.size());
    std::string dir = path.substr(start, end - start);
    if (auto reason = why((dir.empty() ? std::string(".") : dir) + "/" + name)) return reason;
    start = end + 1;
  }
  return std::nullopt;
}

bool is_fault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
         sig == SIGSYS;
}

std::atomic<pid_t> g_child{0};

void forward_signal(int sig, siginfo_t* info, void*) {
  if (info->si_code > 0) {
    // Sent by the kernel, not by a process: a fault of sonde run's own (it dies of it, once the
    // handler returns to the faulting instruction), or a terminal's ^C, ^\ or hangup, which went
    // to the whole foreground process group, the command included.
    if (is_fault(sig)) ::signal(sig, SIG_DFL);
    return;
  }
  pid_t child = g_child.load();
  if (child > 0) ::sigqueue(child, sig, forwarded_signal_value(info->si_pid));
}

// sonde run ends as its command did: killed by the same signal, so that whoever waits for it
// sees WIFSIGNALED. Without a core file of its own: the command's is the one that matters.
void die_of(int sig) {
  std::fflush(nullptr);
  struct rlimit no_core {};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  // Still alive: the init of a PID namespace ignores it. The shell's convention, then.
}

// Stops sonde run with the signal that stopped its command, where that one stops it too (a
// terminal's stop signals at their default: a shell then says "Stopped" as it would of the
// command); else with SIGSTOP, which always does. Returns once continued.
void stop_like(int sig) {
  struct sigaction now {};
  bool terminal = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
  bool stops = terminal && ::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL;
  ::raise(stops ? sig : SIGSTOP);
}

// Access bits say nothing for root or on read-only mounts; creating a file is the real test.
void check_output_directory(const fs::path& output) {
  if (output.string().size() > kLongestProfilePath)
    throw Error(
        fmt::format("the output's full path is {} bytes long, over the {} SQLite can "
                    "open a file by: give -o a shorter path",
                    output.string().size(), kLongestProfilePath));
  if (output_name_length(output.string()) > longest_output_name(output.string()))
    throw Error(
        fmt::format("the output's name is {} characters long, over the {} its "
                    "directory allows a profile (SQLite keeps <name>-journal beside it)",
                    output_name_length(output.string()), longest_output_name(output.string())));
  fs::path dir = output.parent_path();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(fmt::format("output directory {} does not exist", dir.string()));
  fs::path probe = dir / fmt::format(".sonde-probe-{}", ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(
        fmt::format("cannot write to output directory {}: {}", dir.string(), std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

// Why a profile no process wrote to may be so, by its age: another run's claim of the name
// before its first flush (the next second), or a run that died before it or whose flushes
// failed, whose blank file sent every later run beside it with "a moment ago?" (a red-team find).
std::string blank_profile_age(time_t made) {
  double age = std::difftime(std::time(nullptr), made);
  if (age < 10) return " (a run started into it a moment ago?); left as it is";
  std::string ago = age < 120    ? fmt::format("{:.0f} s", age)
                    : age < 7200 ? fmt::format("{:.0f} min", age / 60)
                                 : fmt::format("{:.0f} h", age / 3600);
  return fmt::format(
      ", {} after it was made (a run killed before its first flush, one whose flushes failed, "
      "or one still running with periodic flushes off): left as it is; remove it, or use "
      "--force, to write there",
      ago);
}

void prepare_output(const fs::path& output, const std::string& shown, bool force) {
  struct stat st {};
  if (::lstat(output.c_str(), &st) == 0) {
    // A directory or a device is said as such at once: it was "not a sonde profile; use
    // --force", and --force then said "is a directory" (a red-team find).
    require_regular_output(output.string(), shown);
    if (!force) {
      switch (keep_previous_profile(output.string())) {
        case PreviousProfile::kept:
          say("sonde: kept the previous profile {} as {}\n", shown, shown + ".old");
          check_output_directory(output);
          return;
        case PreviousProfile::not_started:
          say("sonde: {} holds no process yet{}\n", shown, blank_profile_age(st.st_mtime));
          check_output_directory(output);
          return;
        case PreviousProfile::none:
          break;
      }
      throw Error(
          fmt::format("{} already exists and is not a sonde profile; use --force to "
                      "replace it or -o for another file",
                      shown));
    }
  }
  check_output_directory(output);
  if (force) {
    // A stale journal or WAL beside a new database would be replayed into it by SQLite.
    for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
      std::string path = output.string() + suffix;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        throw Error(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
    }
  }
}

// The output is replaced (--force) or set aside as .old before the command starts: a file the
// command was given under that name would be gone when it runs (`python3 -m sonde --force -o
// train.py train.py` made the script a profile, and the run then failed on its NUL bytes).
void refuse_command_file_as_output(const std::vector<std::string>& command,
                                   const std::string& program, const fs::path& output,
                                   const std::string& shown) {
  std::vector<std::string> files{program};
  files.insert(files.end(), command.begin() + 1, command.end());
  for (const std::string& file : files)
    if (same_file(file, output.string()))
      throw Error(fmt::format("-o {} names a file the command was given ({}): the profile "
                              "would replace it before the command runs; give it another name",
                              shown, file),
                  2);
}

// An ELF executable without a program interpreter is linked statically: the dynamic loader
// never runs, so LD_PRELOAD (and sonde) cannot reach it. Scripts and other files: false.
bool statically_linked(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Elf64_Ehdr eh{};
  bool is_static = false;
  if (::pread(fd, &eh, sizeof eh, 0) == ssize_t(sizeof eh) &&
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
      eh.e_phentsize == sizeof(Elf64_Phdr)) {
    is_static = true;
    for (unsigned i = 0; i < eh.e_phnum && is_static; ++i) {
      Elf64_Phdr ph{};
      if (::pread(fd, &ph, sizeof ph, off_t(eh.e_phoff + i * sizeof ph)) != ssize_t(sizeof ph) ||
          ph.p_type == PT_INTERP)
        is_static = false;
    }
  }
  ::close(fd);
  return is_static;
}

const OptionSpec& spec_of(std::string_view name) {
  for (const OptionSpec& s : kOptionSpecs) {
    if (s.name == name) return s;
  }
  throw Error(fmt::format("{} is not in options.hpp", name));
}

}  // namespace

std::string run_option_problem(std::string_view variable, const std::string& value) {
  const OptionSpec& spec = spec_of(variable);
  if (spec.type != OptionType::kUInt && spec.type != OptionType::kSeconds) return "";
  if (option_in_range(spec, option_number(spec, value))) return "";
  return fmt::format("not a {} from {}{:g} to {:g}",
                     spec.type == OptionType::kUInt ? "whole number" : "number of seconds",
                     spec.zero_ok ? "0 or " : "", spec.min, spec.max);
}

namespace {

void set_environment(const RunOptions& o, const std::string& output, const std::string& library) {
  ::setenv("SONDE_OUTPUT", output.c_str(), 1);
  const char* old = std::getenv("LD_PRELOAD");
  std::string why;
  std::string preload = preloadable_path(library, &why);
  if (preload.empty()) throw Error(fmt::format("sonde run: cannot preload {}: {}", library, why));
  if (old && *old) preload += fmt::format(":{}", old);
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  if (o.python) {
    // As python3 -m sonde's children get it: the autostart sitecustomize starts the hook in
    // every interpreter that loads libsonde (torchrun's workers, a shell script's python3).
    std::string package = find_python_package(library);
    if (package.empty())
      throw Error(
          fmt::format("sonde run --python: cannot find sonde's Python package beside {} "
                      "(its sonde/autostart)",
                      library));
    ::setenv("PYTHONPATH", autostart_python_path(package).c_str(), 1);
  }
  for (const RunVariableOption& option : kRunVariableOptions) {
    auto given = o.variables.find(std::string(option.variable));
    if (given == o.variables.end()) continue;
    // A number is held to its range as the option is parsed (cli/run.cpp: exit 2).
    ::setenv(std::string(option.variable).c_str(), given->second.c_str(), 1);
  }
  // The delay counts from this launch, for every process of the run: an exec'd child or a
  // program started late by a shell script opens its window at the same instant as the first.
  ::unsetenv("SONDE_DELAY_UNTIL");
  if (const char* delay = std::getenv("SONDE_DELAY"); delay != nullptr && *delay != '\0') {
    char* end = nullptr;
    double s = std::strtod(delay, &end);
    if (end != delay && *end == '\0' && s > 0 && s <= 1e6) {
      struct timespec now {};
      clock_gettime(CLOCK_REALTIME, &now);
      int64_t until = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec + std::llround(s * 1e9);
      ::setenv("SONDE_DELAY_UNTIL", std::to_string(until).c_str(), 1);
    }
  }
  // NVTX 3 (header-only, in PyTorch and NVIDIA's libraries) reaches a tool only through the
  // injection library this names: libsonde serves as one, unless the user chose another tool.
  if (const char* nvtx = std::getenv("NVTX_INJECTION64_PATH"); nvtx == nullptr || *nvtx == '\0')
    ::setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
  // Inherited from an enclosing `sonde run`, it would make this run join that one.
  ::unsetenv("SONDE_RUN_ID");
  ::unsetenv("SONDE_UNPROFILED");
}

// The file a run's root process wrote: the name asked for or, when that was taken when the run
// started, the one beside it that the runtime claimed instead (sonde/output_name.hpp).
struct WrittenProfile {
  int alternative = -1;  // -1: none found; else the place: written_name(.., alternative)
  bool any_file = false;
  bool ended = false;      // its last process image made its final flush
  bool exec_last = false;  // ... and that flush was before an exec: the next image wrote nothing
  std::vector<std::int64_t> running;  // other processes of the run, not ended, still alive
  std::string problem;                // why a file that is there could not be read
  std::int64_t others = 0;            // with no root: the run's other processes the file holds
  // The run's processes whose Python hook did not start (run_info python.hook_failed): pid and
  // why. Their own line goes to a terminal only (children of a run are quiet elsewhere), and a
  // batch log of `sonde run --python` under an interpreter the install has no extension for
  // read "profile written" alone (a red-team find).
  std::vector<std::pair<std::int64_t, std::string>> hook_failed;
};

// The last place a run's profile may be: moved to <name>.old by a run into the same name that
// started after this one's last flush and before it was looked for (keep_previous_profile). A
// fault cell's run read "the profile could not be written to same.db" while its profile was
// whole as same.db.old.
constexpr int kKeptAsOld = kOutputAlternatives + 1;

// The name of place `n` (0: the name asked for; then its alternatives; then kKeptAsOld).
std::string written_name(const std::string& output, pid_t root, int n) {
  if (n == 0) return output;
  if (n == kKeptAsOld) return output + ".old";
  return alternative_output(output, root, n);
}

WrittenProfile find_written_profile(const fs::path& output, pid_t root, std::int64_t since_ns) {
  WrittenProfile w;
  for (int n = 0; n <= kKeptAsOld; ++n) {
    std::string name = written_name(output.string(), root, n);
    if (::access(name.c_str(), F_OK) != 0) continue;
    w.any_file = true;
    try {
      // Which file holds this run's root is all it asks: the pages are checked by whatever
      // reads them next (sonde report, or --report below).
      ProfileFile file = ProfileFile::open(name, false);
      // A stale file of an earlier run whose root had the same pid started before this one.
      auto st = file.prepare(
          "SELECT ended_ns IS NOT NULL, COALESCE(end_reason = 'exec', 0) FROM processes "
          "WHERE pid = ? AND started_ns >= ? ORDER BY process_id DESC LIMIT 1");
      st.bind(1, std::int64_t{root}).bind(2, since_ns);
      if (st.step()) {
        w.alternative = n;
        w.ended = st.int64(0) != 0;
        w.exec_last = st.int64(1) != 0;
        // A daemon or a helper the command left behind (multiprocessing's resource tracker)
        // writes as it ends: "written" alone read as a profile that would not change.
        auto alive = file.prepare(
            "SELECT pid, MIN(started_ns) FROM processes WHERE ended_ns IS NULL AND pid <> ? AND "
            "started_ns >= ? AND NOT EXISTS (SELECT 1 FROM processes later WHERE later.pid = "
            "processes.pid AND later.process_id > processes.process_id) GROUP BY pid ORDER BY pid");
        alive.bind(1, std::int64_t{root}).bind(2, since_ns);
        std::vector<std::pair<pid_t, std::int64_t>> left;
        while (alive.step()) left.emplace_back(pid_t(alive.int64(0)), alive.int64(1));
        // And those that have not written yet (a process writes its row at its first flush, a
        // second after its start): a daemon the command started just before it ended (`bash -c
        // "nohup python3 train.py &"`) read "profile written" alone while it went on writing (a
        // red-team find). Known by the run's id in their environment, which the run's exec'd
        // processes start with.
        auto id = file.prepare(
            "SELECT r.uuid FROM runs r JOIN processes p USING (run_id) WHERE p.pid = ? AND "
            "p.started_ns >= ? ORDER BY p.process_id LIMIT 1");
        id.bind(1, std::int64_t{root}).bind(2, since_ns);
        if (id.step())
          for (pid_t pid : processes_with_environment("SONDE_RUN_ID=" + id.text(0)))
            if (pid != root && pid != ::getpid() &&
                std::none_of(left.begin(), left.end(),
                             [&](const auto& p) { return p.first == pid; }))
              left.emplace_back(pid, 0);
        // multiprocessing's resource tracker and forkserver end moments after the root, when
        // their pipe closes: "still running" was said of every forkserver or spawn program
        // (a red-team find). A second for them to go first; a daemon stays named.
        for (int waited_ms = 0; waited_ms <= 1000; waited_ms += 50) {
          std::erase_if(left, [](const auto& p) { return !process_alive(p.first, p.second); });
          if (left.empty()) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        for (const auto& p : left) w.running.push_back(p.first);
        auto failed = file.prepare(
            "SELECT p.pid, i.value FROM run_info i JOIN processes p USING (process_id) "
            "WHERE i.key = 'python.hook_failed' AND p.started_ns >= ? ORDER BY p.process_id");
        failed.bind(1, since_ns);
        while (failed.step()) w.hook_failed.emplace_back(failed.int64(0), failed.text(1));
        return w;
      }
      auto others = file.prepare("SELECT COUNT(*) FROM processes WHERE started_ns >= ?");
      others.bind(1, since_ns);
      if (others.step()) w.others = std::max(w.others, others.int64(0));
    } catch (const Error& e) {
      w.problem = e.what();
    }
  }
  return w;
}

// The files the ranks of a job that this run launched wrote beside `output` (store/rank_files):
// `sonde run -o prof.db -- mpirun ...` names only mpirun's own file otherwise, and the ranks'
// work is in theirs. Said, and noted in the launcher's own file for every reader of it (report,
// candidates; ranks, scaling and merge refuse or leave it out: profile/launcher_file.hpp).
void say_rank_files(const fs::path& output, const std::string& requested, std::int64_t since_ns) {
  RankFilesSaid said = rank_files_said(output.string(), requested, since_ns);
  if (said.line.empty()) return;
  say("{}", said.line);
  note_rank_files(output.string(), said.note);
}

// The arguments the command's process has once the kernel has run a script's interpreter
// ("#!/bin/bash" makes ./train.sh `/bin/bash ./train.sh`; "#!/usr/bin/env bash", env's exec of
// bash), which libsonde reads in it (/proc/self/cmdline).
std::vector<std::string> started_args(const std::string& program,
                                      const std::vector<std::string>& command) {
  std::string line;
  if (std::FILE* f = std::fopen(program.c_str(), "rb")) {
    char buf[256] = {};  // the kernel reads at most this much of the line (BINPRM_BUF_SIZE)
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    line.assign(buf, n);
  }
  if (!line.starts_with("#!")) return command;
  line = line.substr(
      2, line.find('\n') == std::string::npos ? std::string::npos : line.find('\n') - 2);
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  size_t from = 0;
  while (from < line.size() && blank(line[from])) ++from;
  size_t end = from;
  while (end < line.size() && !blank(line[end])) ++end;
  std::string interpreter = line.substr(from, end - from);
  while (end < line.size() && blank(line[end])) ++end;
  std::string argument = line.substr(end);
  while (!argument.empty() && blank(argument.back())) argument.pop_back();
  std::vector<std::string> args;
  if (fs::path(interpreter).filename() == "env" && !argument.empty() &&
      argument.find(' ') == std::string::npos) {
    args.push_back(argument);  // env execs the program it names
  } else {
    args.push_back(interpreter);
    if (!argument.empty()) args.push_back(argument);
  }
  args.push_back(program);
  args.insert(args.end(), command.begin() + 1, command.end());
  return args;
}

// The rank (or outer task) the command's process takes from the environment, as libsonde
// reads it there (runtime.cpp).
RankEnv command_rank_env(const std::string& program, const std::vector<std::string>& command) {
  return process_rank_env([](const char* name) -> const char* { return std::getenv(name); },
                          started_args(program, command));
}

// Returns the file written (its absolute path), or "" when there is none.
std::string say_what_was_written(const RunOptions& o, const RankEnv& rank, const fs::path& asked,
                                 pid_t root, std::int64_t since_ns, bool is_static, int killed_by) {
  // A rank of a parallel job wrote its own file beside the one asked for (sonde/rank_env.hpp),
  // and a launcher of ranks under an outer one its launcher file (sonde/rank_launcher.hpp).
  std::string requested = own_output(o.output, rank);
  fs::path output = own_output(asked.string(), rank);
  WrittenProfile w = find_written_profile(output, root, since_ns);
  if (w.alternative >= 0) {
    std::string shown = written_name(requested, root, w.alternative);
    if (w.alternative == kKeptAsOld)
      say("sonde: another run into {} started after this one's last write and kept this run's "
          "profile as {}\n",
          requested, shown);
    // The image the root exec'd last, killed before its first flush, wrote nothing: "written"
    // alone read as a whole profile. (Ending normally, it was one libsonde never reached: a
    // static or setuid program.)
    if (w.ended && w.exec_last && killed_by != 0)
      say("sonde: profile written to {}, without the program the command exec'd last (killed "
          "before its first flush)\n",
          shown);
    else if (w.ended)
      say("sonde: profile written to {}\n", shown);
    else
      say("sonde: profile written to {}, up to its last periodic flush (the final flush "
          "did not happen or failed)\n",
          shown);
    if (w.hook_failed.size() == 1)
      say("sonde: warning: the Python hook did not start in pid {}, whose Python frames are "
          "not in the profile: {}\n",
          w.hook_failed[0].first, visible(w.hook_failed[0].second));
    else if (w.hook_failed.size() > 1)
      say("sonde: warning: the Python hook did not start in {} processes of the run (pid {} "
          "first), whose Python frames are not in the profile: {}\n",
          w.hook_failed.size(), w.hook_failed[0].first, visible(w.hook_failed[0].second));
    if (w.running.size() == 1) {
      say("sonde: 1 process of the run is still running (pid {}); it adds its part to the "
          "profile when it ends\n",
          w.running[0]);
    } else if (w.running.size() > 1) {
      std::vector<std::int64_t> shown(w.running.begin(),
                                      w.running.begin() + std::min<size_t>(5, w.running.size()));
      say("sonde: {} processes of the run are still running (pids {}{}); they add their part to "
          "the profile when they end\n",
          w.running.size(), fmt::join(shown, ", "), w.running.size() > 5 ? ", ..." : "");
    }
    std::string written = written_name(output.string(), root, w.alternative);
    // Where the root wrote beside the name asked for (another job had it), its ranks did too:
    // prof.<pid>.rank0.db, named from the file written, as the note goes into it.
    if (rank.rank < 0) say_rank_files(written, shown, since_ns);
    return written;
  }
  if (w.any_file && w.problem.empty() && w.others > 0) {
    // Its children wrote theirs: "no process of this run in it" was false.
    say("sonde: warning: the command's own process wrote nothing to {} (see sonde's messages "
        "above); it holds only {} other process{} of the run\n",
        requested, w.others, w.others == 1 ? "" : "es");
  } else if (w.any_file) {
    say("sonde: warning: the profile could not be written to {} ({})\n", requested,
        w.problem.empty() ? "no process of this run in it; see sonde's messages above" : w.problem);
  } else if (!is_static) {  // a static command was named as such before it ran
    say("sonde: warning: no profile was written to {} (see sonde's messages above, if "
        "any; else a program that never loaded libsonde.so)\n",
        requested);
  }
  return "";
}

// The flat profile on stdout once the command has ended, as `python3 -m cProfile -s` prints its
// table; a profile that cannot be read is said in one line and leaves the exit status alone.
void print_report(const std::string& path, const std::string& sort) {
  try {
    ProfileFile file = ProfileFile::open(path);
    RunSummary run = load_run_summary(file);
    Hotspots hotspots = compute_hotspots(file, parse_report_sort(sort));
    std::fflush(stderr);
    std::fflush(stdout);
    quiet_write(STDOUT_FILENO, render_report_text(run, hotspots, 0));
  } catch (const Error& e) {
    say("sonde: cannot print the report of {}: {}\n", path, e.what());
  }
}

std::int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

fs::path absolute_output(const std::string& output, std::string_view what) {
  std::error_code ec;
  fs::path p = fs::absolute(output, ec);
  if (ec)
    throw Error(
        fmt::format("cannot place {} {}: the current directory is gone ({}); give -o an "
                    "absolute path",
                    what, output, ec.message()));
  return p.lexically_normal();
}

std::string find_preload_library() {
  if (const char* env = std::getenv("SONDE_LIBRARY"); env && *env) {
    if (::access(env, R_OK) != 0)
      throw Error(fmt::format("SONDE_LIBRARY={}: {}", env, std::strerror(errno)));
    return fs::absolute(env).lexically_normal().string();
  }
  fs::path lib = (executable_dir() / ".." / "lib" / "libsonde.so").lexically_normal();
  if (::access(lib.c_str(), R_OK) != 0)
    throw Error(fmt::format("cannot find libsonde.so (looked at {}); set SONDE_LIBRARY to its path",
                            lib.string()));
  return lib.string();
}

std::optional<std::string> resolve_command(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos)
    return is_executable_file(name) ? std::optional(name) : std::nullopt;
  const char* env = std::getenv("PATH");
  std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

std::string command_to_start(const std::string& name) {
  if (std::optional<std::string> program = resolve_command(name)) return *program;
  if (auto why = cannot_execute(name)) throw Error(fmt::format("cannot execute {}", *why), 126);
  throw Error(fmt::format("command not found: {}", name), 127);
}

int run_command(const RunOptions& o) {
  if (o.command.empty()) throw Error("no command given (sonde run [options] -- COMMAND ...)", 2);
  std::optional<std::string> program = command_to_start(o.command[0]);
  std::string library = find_preload_library();
  fs::path output = absolute_output(o.output, "the profile");
  // A rank of a parallel job writes prof.rank<R>.db, never the name asked for: that one, an
  // unrelated file, made every rank refuse; --force left the rank's own earlier file, and the
  // rank wrote beside it. Without --force a rank's earlier file stays, the rank writing beside
  // it (prof.rank<R>.<pid>.db) and saying so.
  RankEnv rank = command_rank_env(*program, o.command);
  bool own_name = rank.rank >= 0 || rank.outer_task >= 0;  // a rank's or a launcher's
  // python3 -m sonde's re-exec checked its program's files itself: this command holds its
  // arguments, -o's value among them.
  if (!std::getenv("SONDE_PYTHON_LAUNCHED")) {
    refuse_command_file_as_output(o.command, *program, output, o.output);
    if (own_name)
      refuse_command_file_as_output(o.command, *program, own_output(output.string(), rank),
                                    own_output(o.output, rank));
  }
  if (!own_name) {
    prepare_output(output, o.output, o.force);
  } else {
    fs::path mine = own_output(output.string(), rank);
    if (o.force)
      prepare_output(mine, own_output(o.output, rank), true);
    else
      check_output_directory(mine);
  }
  set_environment(o, output.string(), library);
  bool is_static = statically_linked(*program);
  if (is_static)
    say("sonde run: {} is statically linked: LD_PRELOAD cannot reach it, so "
        "nothing is recorded; it runs as usual\n",
        *program);

  std::vector<char*> argv;
  for (const auto& arg : o.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  // Blocked across fork: one that came before the handlers below would end sonde run alone and
  // orphan the command. The command gets the mask and every disposition as they were.
  sigset_t terminating, old_mask;
  sigemptyset(&terminating);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (terminates_by_default(sig)) sigaddset(&terminating, sig);
  }
  ::sigprocmask(SIG_BLOCK, &terminating, &old_mask);
  // A second of slack: the runtime's start time is derived from its own clock calibration.
  std::int64_t since_ns = realtime_ns() - 1'000'000'000;
  pid_t self = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    int err = errno;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    throw Error(fmt::format("fork failed: {}", std::strerror(err)));
  }
  if (child == 0) {
    // sonde run killed by SIGKILL (`kill -9 $!`, a harness ending the process it started): the
    // command ends too, as it would have been killed alone, instead of running on orphaned. Kept
    // across its exec; not across a set-user-ID one, nor by the processes it starts.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != self) ::raise(SIGKILL);  // sonde run died before the line above
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execv(program->c_str(), argv.data());
    int err = errno;
    std::string msg =
        fmt::format("sonde run: cannot execute {}: {}\n", *program, std::strerror(err));
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(err == ENOENT ? 127 : 126);
  }
  // A signal sent to sonde run (kill, a scheduler, timeout) goes on to the command, which
  // flushes its profile and ends as it would alone; sonde run then ends the same way. Signals
  // ignored here stay ignored: the command inherited that, and would ignore them too.
  g_child.store(child);
  struct sigaction forward {};
  struct sigaction previous[NSIG] {};
  bool forwarded[NSIG]{};
  forward.sa_sigaction = forward_signal;
  forward.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&forward.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!sigismember(&terminating, sig) || ::sigaction(sig, nullptr, &previous[sig]) != 0) continue;
    if (previous[sig].sa_handler != SIG_IGN)
      forwarded[sig] = ::sigaction(sig, &forward, nullptr) == 0;
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  int status = 0;
  for (;;) {
    if (::waitpid(child, &status, WUNTRACED) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("waitpid failed: {}", std::strerror(errno)));
    }
    if (!WIFSTOPPED(status)) break;
    // The command stopped (it sent itself SIGSTOP, or a stop signal reached it alone): a
    // shell's job control waits for sonde run, its child, which stopped too, as `time` or
    // `strace` do. Continued (the shell's `fg`, `bg`, or a SIGCONT to sonde run alone), it
    // continues the command.
    stop_like(WSTOPSIG(status));
    ::kill(child, SIGCONT);
  }
  g_child.store(0);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (forwarded[sig]) ::sigaction(sig, &previous[sig], nullptr);
  }

  int code = 0;
  int killed_by = 0;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    killed_by = WTERMSIG(status);
    code = 128 + killed_by;
    say("sonde run: {} killed by signal {} ({})\n", o.command[0], killed_by,
        signal_name(killed_by));
  }
  std::string written =
      say_what_was_written(o, rank, output, child, since_ns, is_static, killed_by);
  if (o.report_sort && !written.empty()) print_report(written, *o.report_sort);
  if (killed_by != 0) die_of(killed_by);
  return code;
}

std::string environment_help() {
  std::string out = "Environment (read by libsonde.so; the options above set some of them):\n";
  for (const auto& spec : kOptionSpecs) {
    if (spec.internal) continue;
    std::string def =
        spec.default_value.empty() ? "" : fmt::format(" (default {})", spec.default_value);
    std::string help(spec.help);
    std::erase(help, '`');
    out += fmt::format("  {}{}\n      {}\n", spec.name, def, help);
  }
  return out;
}

std::string environment_markdown() {
  std::string out = "| variable | default | meaning |\n| --- | --- | --- |\n";
  for (const auto& spec : kOptionSpecs) {
    std::string def = spec.default_value.empty() ? "" : fmt::format("`{}`", spec.default_value);
    out += fmt::format("| `{}` | {} | {} |\n", spec.name, def, spec.help);
  }
  return out;
}

}  // namespace sonde::analyzers
