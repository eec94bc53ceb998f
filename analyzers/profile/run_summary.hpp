// What a profile says about the run itself: command, machine, processes, BLAS, warnings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct Note {
  std::string severity;  // 'info' or 'warning'
  std::string topic;
  std::string message;
  std::optional<std::int64_t> pid;  // the process that raised it, when known
};

struct RunSummary {
  int runs = 0;
  std::string command;
  std::string host;
  std::string cpu_model;
  std::optional<std::int64_t> cores;
  std::string mode;
  std::int64_t processes = 0;
  std::int64_t threads = 0;          // busy (thread_times): the 100 % is theirs
  std::int64_t idle_threads = 0;     // registered, no measured call (run_totals)
  std::int64_t waiting_threads = 0;  // waiting for work most of their life (run_totals)
  std::optional<double> wall_s;      // the run's total: first process start to last end (or flush)
  std::optional<std::string> blas_library;
  std::optional<std::string> blas_threads;
  std::optional<std::string> torch_threads;  // torch.get_num_threads(), where torch was imported
  // The cgroup's CPU quota in cores, and the time it stopped the cgroup's threads over the run
  // (run_info cpu.quota, cpu.throttled_s), where a quota was set.
  std::optional<std::string> cpu_quota, cpu_throttled_s;
  std::optional<std::string> fpu_ftz;
  std::optional<std::string> fpu_daz;
  // The collection window the run asked for (run_info env.SONDE_DELAY, SONDE_STEPS,
  // SONDE_STEP_REGION): "the whole run", "--delay 25", "--steps 10 (region 'step')".
  std::string window = "the whole run";
  // How libsonde measured, as the options that ask for it, from run_info (env.SONDE_TRACE,
  // SONDE_SAMPLE_HZ, SONDE_COUNTERS, SONDE_ADAPTIVE; python.hook): "--trace", "--sample 997",
  // "--python". What `sonde run` was given is not in its command; python3 -m sonde's is.
  std::vector<std::string> measured;
  std::vector<Note> notes;
};

RunSummary load_run_summary(const ProfileFile& file);

// A run's command (RunSummary::command) as the program's: `python3 -m sonde -o a1.db --lines
// step train.py` ran `python3 train.py`, as `sonde run --python` records it. The daily loop
// writes each run's own file, and re-profiles with --lines on the hot function: diff warned
// "the runs may do different work" for both. What diff and tune's results compare.
std::string program_command(const std::string& command);
// python3 -m sonde's options in `command` that change what is measured (--lines, --builtins,
// --trace, ...; the window's are the window's), with their values: "" for none.
std::string measuring_options(const std::string& command);
// The same of a run: its command's, and what run_info says of the others (RunSummary::measured),
// each option once.
std::string measuring_options(const RunSummary& run);

// A run's run_info rows (?1: its run_id), in the order in which a later row of a key wins:
// the processes' rows, the root's last (whatever its row id: a child that ended within the
// root's first second was written first), then the run-wide ones.
// The cgroup's throttling counters (cpu.periods, cpu.throttled_*) win from the process that
// counted the most periods, whatever its origin: each process counts from its own start, and
// the root image of `sonde run ./entrypoint.sh` that execs python counted its shell's moment.
inline constexpr const char* kRunInfoLastWinsSql =
    "SELECT key, value FROM (SELECT i.key, i.value, 0 AS throttling, i.process_id IS NULL AS "
    "run_wide, p.origin = 'root' AS root, p.started_ns AS started, i.process_id AS id "
    "FROM run_info i LEFT JOIN processes p USING (process_id) WHERE i.run_id = ?1 "
    "UNION ALL SELECT key, value, 1, 0, 0, 0, 0 FROM run_info WHERE run_id = ?1 AND key IN "
    "('cpu.periods', 'cpu.throttled_periods', 'cpu.throttled_s') AND process_id = (SELECT "
    "process_id FROM run_info WHERE run_id = ?1 AND key = 'cpu.periods' ORDER BY "
    "CAST(value AS INTEGER) DESC LIMIT 1)) "
    "ORDER BY throttling, run_wide, root, started DESC, id DESC";

// The lines printed above a text report: run facts, then one line per note.
std::string render_run_header(const RunSummary& summary);
// One "warning: ..." (or "note: ..." for info) line per note.
std::string render_notes(const RunSummary& summary);
Json run_summary_to_json(const RunSummary& summary);  // without the notes
Json notes_to_json(const RunSummary& summary);

}  // namespace sonde::analyzers
