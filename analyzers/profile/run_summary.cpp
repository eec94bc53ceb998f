#include "profile/run_summary.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "base/signal_name.hpp"
#include "process/redact.hpp"
#include "profile/process_alive.hpp"
#include "sonde/run_options.hpp"

namespace sonde::analyzers {

RunSummary load_run_summary(const ProfileFile& file) {
  RunSummary s;
  std::int64_t run_id = 0;
  {
    auto st = file.prepare("SELECT COUNT(*) FROM runs");
    if (st.step()) s.runs = static_cast<int>(st.int64(0));
  }
  {
    // A merged file holds several runs; the header describes the first.
    auto st = file.prepare(
        "SELECT run_id, command, host, cpu_model, cores, mode FROM runs ORDER BY run_id LIMIT 1");
    if (st.step()) {
      run_id = st.int64(0);
      s.command = st.text(1);
      s.host = st.text(2);
      s.cpu_model = st.text(3);
      if (!st.is_null(4)) s.cores = st.int64(4);
      s.mode = st.text(5);
    }
  }
  {
    // Threads without a measured call are counted apart: they are in no denominator.
    auto st = file.prepare(
        "SELECT processes, busy_threads, idle_threads, wall_s, waiting_threads FROM run_totals");
    if (st.step()) {
      s.processes = st.int64(0);
      s.threads = st.int64(1);
      s.idle_threads = st.int64(2);
      s.waiting_threads = st.int64(4);
      if (!st.is_null(3) && st.real(3) >= 0) s.wall_s = st.real(3);
    }
  }
  {
    // Rows are read so that the one that must win comes last: run-wide, else the root process.
    auto st = file.prepare(kRunInfoLastWinsSql);
    st.bind(1, run_id);
    std::string delay, steps, region = "step";
    while (st.step()) {
      std::string key = st.text(0);
      std::string value = st.text(1);
      if (key == "env.SONDE_DELAY")
        delay = value;
      else if (key == "env.SONDE_STEPS")
        steps = value;
      else if (key == "env.SONDE_STEP_REGION")
        region = value;
      else if (key == "blas.library")
        s.blas_library = value;
      else if (key == "blas.threads")
        s.blas_threads = value;
      else if (key == "torch.num_threads")
        s.torch_threads = value;
      else if (key == "cpu.quota")
        s.cpu_quota = value;
      else if (key == "cpu.throttled_s")
        s.cpu_throttled_s = value;
      else if (key == "fpu.ftz")
        s.fpu_ftz = value;
      else if (key == "fpu.daz")
        s.fpu_daz = value;
      else if (key == "env.SONDE_TRACE" && value == "1")
        s.measured.push_back("--trace");
      else if (key == "env.SONDE_SAMPLE_HZ" && std::atof(value.c_str()) > 0)
        s.measured.push_back("--sample " + value);
      else if (key == "env.SONDE_COUNTERS" && !value.empty())
        s.measured.push_back("--counters " + value);
      else if (key == "env.SONDE_ADAPTIVE" && std::atof(value.c_str()) > 0)
        s.measured.push_back("--adaptive");
      else if (key == "python.hook")
        s.measured.push_back("--python");
    }
    std::sort(s.measured.begin(), s.measured.end());
    s.measured.erase(std::unique(s.measured.begin(), s.measured.end()), s.measured.end());
    // As libsonde reads them: steps decide over a delay; 0 (or what is no number) is off.
    if (std::atof(steps.c_str()) > 0)
      s.window = fmt::format("--steps {} (region '{}')", steps, region);
    else if (std::atof(delay.c_str()) > 0)
      s.window = fmt::format("--delay {}", delay);
  }
  {
    auto st = file.prepare(
        "SELECT n.severity, n.topic, n.message, p.pid FROM notes n "
        "LEFT JOIN processes p USING (process_id) ORDER BY n.note_id");
    while (st.step()) {
      Note note{st.text(0), st.text(1), st.text(2), std::nullopt};
      if (!st.is_null(3)) note.pid = st.int64(3);
      s.notes.push_back(std::move(note));
    }
  }
  {
    // A process that never wrote its final flush (SIGKILL, a machine that went down, or one
    // still running) left no note of its own: the reader says what its figures cover. One
    // that entered a seccomp filter said why it would not write it (runtime/sandbox.cpp).
    // One still running on this host (a run read while it goes on, --flush-interval) is said
    // to be, as the launcher tells it: listing a crash first had a live run read as a lost one.
    char here[256] = {};
    bool this_host = ::gethostname(here, sizeof here - 1) == 0 && s.host == here;
    auto st = file.prepare(
        "SELECT pid, (last_flush_ns - started_ns) / 1e9, started_ns FROM processes p "
        "WHERE ended_ns IS NULL AND end_reason IS NULL AND NOT EXISTS (SELECT 1 FROM notes n "
        "WHERE n.process_id = p.process_id AND n.topic = 'seccomp-filter') ORDER BY process_id");
    while (st.step()) {
      std::string upto = st.is_null(1)
                             ? std::string("its last flush")
                             : fmt::format("its last flush, {:.3f} s after it started", st.real(1));
      if (this_host && process_alive(static_cast<pid_t>(st.int64(0)), st.int64(2))) {
        s.notes.push_back(Note{"info", "running",
                               fmt::format("the process is still running: its figures are as of "
                                           "{}; read the file again when it ends",
                                           upto),
                               st.int64(0)});
        continue;
      }
      s.notes.push_back(Note{"warning", "unfinished",
                             fmt::format("the process did not write its final flush (killed by "
                                         "SIGKILL or a crash of the machine, the flush failed on "
                                         "a full disk or quota, or still running): its figures "
                                         "are as of {}",
                                         upto),
                             st.int64(0)});
    }
  }
  // The run's main processes, whose end is the run's: its first (the root, a rank's own
  // file's maker), each rank's first process (a rank's children inherit its RANK), and the
  // images they exec'd (same pid). Not a pool's workers,
  // which their parent ends with SIGTERM (multiprocessing's Pool.terminate, as `with Pool()`
  // leaves), nor a helper child whose failure its parent handles.
  static const std::string kMainProcessesSql = fmt::format(
      "WITH RECURSIVE main(process_id, pid) AS ("
      "  SELECT process_id, pid FROM processes p WHERE process_id IN ({}) OR (rank IS NOT NULL "
      "  AND NOT EXISTS (SELECT 1 FROM processes q WHERE q.process_id = p.parent_process_id "
      "  AND q.rank = p.rank)) "
      "  UNION "
      "  SELECT p.process_id, p.pid FROM processes p JOIN main m "
      "  ON p.parent_process_id = m.process_id WHERE p.origin = 'exec' AND p.pid = m.pid)",
      kRunFirstProcesses);
  {
    // A process a signal ended (timeout's SIGTERM at a time limit, a scheduler's, a crash's
    // SIGSEGV) wrote its final flush, and its file read as a run that had finished: a red-team
    // hung DDP job killed by `timeout` read as a load imbalance, nothing saying both ranks died.
    auto st = file.prepare(fmt::format(
        "{} SELECT p.pid, CAST(substr(p.end_reason, 8) AS INTEGER) FROM processes p "
        "JOIN main USING (process_id) WHERE p.end_reason LIKE 'signal %' ORDER BY p.process_id",
        kMainProcessesSql));
    while (st.step()) {
      int sig = static_cast<int>(st.int64(1));
      std::string name = signal_name(sig);
      s.notes.push_back(Note{"warning", "signal",
                             fmt::format("the process was ended by signal {}{}: its figures "
                                         "stop there (a time limit, a hang killed, a crash)",
                                         sig, name.starts_with("SIG") ? " (" + name + ")" : ""),
                             st.int64(0)});
    }
  }
  {
    // A process that exited with a failure status (run_info exit.status: Python's uncaught
    // exception exits with 1): its file read as a finished run (a red-team rank that died of a
    // RuntimeError, and its peer's failed all-reduce, left clean-looking profiles).
    auto st = file.prepare(
        fmt::format("{} SELECT p.pid, i.value FROM run_info i JOIN processes p USING (process_id) "
                    "JOIN main USING (process_id) WHERE i.key = 'exit.status' AND i.value <> '0' "
                    "ORDER BY p.process_id",
                    kMainProcessesSql));
    while (st.step()) {
      // The usual why, only where the status has one: 1 an uncaught exception's, 128 + N a
      // signal's (a red team's deliberate sys.exit(130) after Ctrl-C was told of exceptions).
      std::string status = st.text(1);
      int code = std::atoi(status.c_str());
      std::string name = code > 128 && code < 128 + 65 ? signal_name(code - 128) : "";
      std::string why = code == 1 ? " (an uncaught Python exception exits with 1)"
                        : name.starts_with("SIG")
                            ? fmt::format(
                                  " (128 + {}: {}, as a shell reports a death by it, or a "
                                  "program's own exit after catching it)",
                                  code - 128, name)
                            : "";
      s.notes.push_back(Note{"warning", "exit-status",
                             fmt::format("the process exited with status {}, a failure{}: its "
                                         "figures are of a run that did not finish its work",
                                         status, why),
                             st.int64(0)});
    }
  }
  if (s.processes == 0) {
    // The file libsonde prepared at start (the blank profile, renamed into place) and never
    // flushed into: the run's first process ended before its first flush, 1 s in (SIGKILL, a
    // crash of the machine), or is still starting. An empty table would read as a program that
    // ran nothing.
    s.notes.push_back(Note{"warning", "unfinished",
                           "no process of the run wrote to this profile: it ended before its "
                           "first flush (killed by SIGKILL, or a crash of the machine), its "
                           "flushes failed (a full disk or quota: sonde said so as it ran), or "
                           "it is still starting; nothing was measured into it",
                           std::nullopt});
  }
  if (s.processes > 0) {
    // The run's first process wrote nothing (its flushes failed: ulimit -f, a full disk) and
    // its children did: the file read as a clean profile of a child, the child's command on
    // the command line (a red-team find). Said, where no process is the run's root nor made
    // the file: a rank's own file (prof.rank0.db) begins with the rank, torchrun's worker, a
    // child of the launcher (run_info `output.claimed`), and every torchrun rank file and
    // every merge of them said that its first process had written nothing. One rank of a file
    // its ranks share (torch.multiprocessing.spawn's) leaves the first process out, and said
    // so of every rank.
    auto st = file.prepare(fmt::format("{} LIMIT 1", kRunFirstProcesses));
    if (!st.step() && !file.first_process_left_out())
      s.notes.push_back(Note{
          "warning", "unfinished",
          "the run's first process (the command sonde started) wrote nothing to this profile: "
          "its flushes failed (a full disk, a quota or ulimit -f; sonde said so as it ran) or it "
          "was killed before its first flush; the command above and every figure here are its "
          "child processes' alone",
          std::nullopt});
  }
  {
    // A fork child killed before its first flush (SIGKILL to a process group: a DataLoader's
    // workers with their main process) left no row at all; its parent counted its forks
    // (run_info process.forks, written soon after them), so the reader can say so.
    auto st = file.prepare(
        "SELECT p.pid, CAST(i.value AS INTEGER) AS forks, (SELECT COUNT(*) FROM processes c "
        "WHERE c.parent_process_id = p.process_id AND c.origin = 'fork') AS seen "
        "FROM processes p JOIN run_info i ON i.process_id = p.process_id "
        "AND i.key = 'process.forks' WHERE forks > seen ORDER BY p.process_id");
    while (st.step()) {
      int64_t forks = st.int64(1), missing = forks - st.int64(2);
      s.notes.push_back(Note{
          "warning", "unfinished",
          fmt::format("{} of the {} processes it forked wrote nothing to the profile: killed "
                      "(SIGKILL, or a crash) before their first flush, 1 s after they start, or "
                      "still running",
                      missing, forks),
          st.int64(0)});
    }
  }
  return s;
}

namespace {
// python3 -m sonde's own options that take a value, beside the run options' (its __main__.py's
// _VALUED): the word after one is its value, not the program.
constexpr std::array<std::string_view, 5> kLauncherValued{"-o", "--output", "-s", "--sort",
                                                          "--lines"};

bool takes_value(std::string_view option) {
  if (std::find(kLauncherValued.begin(), kLauncherValued.end(), option) != kLauncherValued.end())
    return true;
  return std::any_of(
      kRunVariableOptions.begin(), kRunVariableOptions.end(),
      [&](const RunVariableOption& o) { return o.flag == option && o.flag_value.empty(); });
}

}  // namespace

namespace {

// python3 -m sonde's options that change what is measured, not what the program does: a line
// timed, a builtin call or an import recorded, a call traced, a stack sampled, an operator's
// shapes kept each add their cost to what they measure, and --paused records only what the
// program's sonde.start() and stop() enclose (a red team's paused run read np.ones "2.01x
// faster", half its calls unrecorded, without a warning). The window's options (--delay,
// --steps, --step-region) are the window's, which diff says apart; the others (the output,
// --force, --sort, --flush-interval, --no-record-args, the launch) change neither.
constexpr std::array<std::string_view, 9> kMeasuring{"--lines",         "--builtins", "--imports",
                                                     "--record-shapes", "--trace",    "--counters",
                                                     "--sample",        "--adaptive", "--paused"};

struct Launch {
  std::vector<std::string> program;    // the interpreter's words, then the program's
  std::vector<std::string> measuring;  // sonde's options of kMeasuring, with their values
};

Launch split_launch(const std::string& command) {
  std::vector<std::string> words = shell_words(command);
  Launch out;
  std::size_t i = 0;
  while (i + 1 < words.size() && !(words[i] == "-m" && words[i + 1] == "sonde")) ++i;
  if (i + 1 >= words.size()) {
    out.program = words;
    return out;
  }
  out.program.assign(words.begin(), words.begin() + std::ptrdiff_t(i));
  std::size_t j = i + 2;
  while (j < words.size()) {
    const std::string& w = words[j];
    if (w == "--") {
      ++j;
      break;
    }
    if (w.size() < 2 || w[0] != '-' || w == "-m" || w == "-c") break;
    std::string_view name = std::string_view(w).substr(0, w.find('='));
    bool value = w.find('=') == std::string::npos && takes_value(w) && j + 1 < words.size();
    if (std::find(kMeasuring.begin(), kMeasuring.end(), name) != kMeasuring.end()) {
      out.measuring.push_back(w);
      if (value) out.measuring.push_back(words[j + 1]);
    }
    j += value ? 2 : 1;
  }
  out.program.insert(out.program.end(), words.begin() + std::ptrdiff_t(j), words.end());
  return out;
}

}  // namespace

std::string program_command(const std::string& command) {
  return shell_line(split_launch(command).program);
}

std::string measuring_options(const std::string& command) {
  return shell_line(split_launch(command).measuring);
}

// `sonde run --trace --sample 997 --python` records the program's command alone: diff said
// nothing of a traced, sampled run against a plain one (a red-team find). run_info has them.
std::string measuring_options(const RunSummary& run) {
  std::vector<std::string> words = split_launch(run.command).measuring;
  std::string out = shell_line(words);
  for (const std::string& m : run.measured) {
    std::string name = m.substr(0, m.find(' '));
    bool said = std::any_of(words.begin(), words.end(), [&](const std::string& w) {
      return w == name || w.starts_with(name + "=");
    });
    if (!said) out += (out.empty() ? "" : " ") + m;
  }
  return out;
}

namespace {
std::string on_off(const std::string& v) { return v == "1" ? "on" : v == "0" ? "off" : v; }
}  // namespace

// One line per distinct note, in the order they were first written, naming the processes
// that wrote it: a test suite's 40 helper processes that intercept nothing wrote one line each.
std::string render_notes(const RunSummary& s) {
  struct Line {
    const Note* note;
    std::vector<int64_t> pids;
  };
  std::vector<Line> lines;
  for (const auto& note : s.notes) {
    auto same = std::find_if(lines.begin(), lines.end(), [&](const Line& l) {
      return l.note->severity == note.severity && l.note->message == note.message;
    });
    if (same == lines.end()) same = lines.insert(lines.end(), Line{&note, {}});
    if (note.pid) same->pids.push_back(*note.pid);
  }
  constexpr size_t kNamed = 3;
  std::string out;
  for (const Line& l : lines) {
    std::string where;
    if (l.pids.size() == 1) {
      where = fmt::format(" (pid {})", l.pids[0]);
    } else if (!l.pids.empty()) {
      std::vector<int64_t> named(l.pids.begin(), l.pids.begin() + std::min(kNamed, l.pids.size()));
      where =
          fmt::format(" ({} processes: pid {}{})", l.pids.size(), fmt::join(named, ", "),
                      l.pids.size() > kNamed ? fmt::format(" and {} more", l.pids.size() - kNamed)
                                             : std::string());
    }
    out += fmt::format("{}: {}{}\n", l.note->severity == "info" ? "note" : "warning",
                       visible(l.note->message), where);
  }
  return out;
}

std::string render_run_header(const RunSummary& s) {
  std::string out;
  out += fmt::format("command:   {}\n", s.command.empty() ? "?" : visible(s.command));
  std::string machine = s.host.empty() ? "?" : s.host;
  if (!s.cpu_model.empty()) machine += ", " + s.cpu_model;
  if (s.cores) machine += fmt::format(", {} cores", *s.cores);
  // A container's limit: the cores the threads may use at once, whatever the host has.
  if (s.cpu_quota) {
    machine += fmt::format("; CPU quota {} cores (cgroup)", *s.cpu_quota);
    if (s.cpu_throttled_s) machine += fmt::format(", throttled {} s", *s.cpu_throttled_s);
  }
  // Every value of the file escaped, as the command is: a shared profile's host, CPU quota or
  // BLAS could clear a terminal or retitle it (a red-team find).
  out += fmt::format("host:      {}\n", visible(machine));
  out += fmt::format("processes: {}, threads: {}", s.processes, s.threads);
  if (s.waiting_threads > 0) out += fmt::format(" (+{} waiting for work)", s.waiting_threads);
  if (s.idle_threads > 0) out += fmt::format(" (+{} idle)", s.idle_threads);
  if (s.runs > 1) out += fmt::format(", runs: {}", s.runs);
  if (s.wall_s) out += fmt::format(", wall time: {:.3f} s", *s.wall_s);
  out += "\n";
  if (s.blas_library || s.blas_threads || s.fpu_ftz || s.fpu_daz) {
    // No BLAS library seen (a program of Python alone): said, not "?" (a red-team nit).
    std::string blas = s.blas_library.value_or("none seen");
    if (s.blas_threads) blas += fmt::format(", {} threads", *s.blas_threads);
    if (s.fpu_ftz) blas += fmt::format("; FTZ {}", on_off(*s.fpu_ftz));
    if (s.fpu_daz) blas += fmt::format(", DAZ {}", on_off(*s.fpu_daz));
    out += fmt::format("BLAS:      {}\n", visible(blas));
  }
  // torch's own pool runs oneDNN whatever the BLAS is set to (candidates: framework-threads).
  if (s.torch_threads)
    out += fmt::format("torch:     {} intra-op thread{}{}\n", visible(*s.torch_threads),
                       *s.torch_threads == "1" ? "" : "s",
                       s.cores ? fmt::format(" of {} cores", *s.cores) : "");
  out += render_notes(s);
  return out;
}

namespace {
auto opt = [](const auto& v) -> Json { return v ? Json(*v) : Json(nullptr); };

// run_info holds text; a count or a figure is a number in JSON (jq's `.blas_threads > 1` read
// "4" > 1 as true whatever the count, a red-team nit), a flag a boolean. A value that is none
// stays as recorded.
Json number(const std::optional<std::string>& v) {
  if (!v) return nullptr;
  const char* text = v->c_str();
  char* end = nullptr;
  long long whole = std::strtoll(text, &end, 10);
  if (end != text && *end == '\0') return whole;
  double figure = std::strtod(text, &end);
  if (end != text && *end == '\0' && std::isfinite(figure)) return figure;
  return *v;
}

Json flag(const std::optional<std::string>& v) {
  if (!v) return nullptr;
  if (*v == "1") return true;
  if (*v == "0") return false;
  return *v;
}
}  // namespace

Json notes_to_json(const RunSummary& s) {
  Json notes = Json::array();
  for (const auto& n : s.notes)
    notes.push_back({{"severity", n.severity},
                     {"topic", n.topic},
                     {"message", n.message},
                     {"pid", opt(n.pid)}});
  return notes;
}

Json run_summary_to_json(const RunSummary& s) {
  return Json{{"command", s.command},
              {"host", s.host},
              {"cpu_model", s.cpu_model},
              {"cores", opt(s.cores)},
              {"mode", s.mode},
              {"runs", s.runs},
              {"processes", s.processes},
              {"threads", s.threads},
              {"idle_threads", s.idle_threads},
              {"waiting_threads", s.waiting_threads},
              {"wall_s", opt(s.wall_s)},
              {"blas_library", opt(s.blas_library)},
              {"blas_threads", number(s.blas_threads)},
              {"torch_threads", number(s.torch_threads)},
              {"cpu_quota", number(s.cpu_quota)},
              {"cpu_throttled_s", number(s.cpu_throttled_s)},
              {"fpu_ftz", flag(s.fpu_ftz)},
              {"fpu_daz", flag(s.fpu_daz)}};
}

}  // namespace sonde::analyzers
