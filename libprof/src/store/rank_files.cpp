#include "store/rank_files.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>
#include <tuple>

#include "process/redact.hpp"
#include "sonde/output_name.hpp"
#include "store/sqlite_db.hpp"

namespace sonde {
namespace fs = std::filesystem;
namespace {

// The readers' wait for ranks still writing their last flush, all files together: it is paid
// inside the profiled process at its exit (runtime.cpp), where 2 s a file could add up.
constexpr auto kPatience = std::chrono::milliseconds(2000);

int busy_ms_left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? int(left.count()) : 0;
}

// The run ids the launcher's own file holds (its command's process and what it started before
// the ranks), which the ranks inherit (SONDE_RUN_ID); empty where it holds none yet.
std::vector<std::string> run_ids_of(const std::string& output, int busy_ms) {
  std::vector<std::string> ids;
  Database db;
  if (db.open_readonly(output, busy_ms) != SQLITE_OK) return ids;
  Statement st(db.handle(), "SELECT uuid FROM runs");
  while (st.ok() && st.step() == SQLITE_ROW) ids.push_back(st.column_text(0));
  return ids;
}

// Whether the rank-named file `path` is this run's: one of `runs` in it, or without them a
// process started since `since_ns`. Not a profile, or not readable: not one this run can name,
// but for a rank killed inside a flush, whose journal a reader may not roll back: its file is
// this run's where that journal was written since the run began (the merge suggested left it
// out, unnamed).
bool of_this_run(const std::string& path, const std::vector<std::string>& runs, int64_t since_ns,
                 int busy_ms, long& attempt, std::string& window_unopened) {
  Database db;
  if (db.open_readonly(path, busy_ms) != SQLITE_OK) {
    struct stat journal {};
    return stat((path + "-journal").c_str(), &journal) == 0 &&
           int64_t(journal.st_mtim.tv_sec) * 1000000000 + journal.st_mtim.tv_nsec >= since_ns;
  }
  bool ours = false;
  if (!runs.empty()) {
    Statement st(db.handle(), "SELECT uuid FROM runs");
    while (!ours && st.ok() && st.step() == SQLITE_ROW)
      ours = std::find(runs.begin(), runs.end(), st.column_text(0)) != runs.end();
  } else {
    Statement st(db.handle(), "SELECT COUNT(*) FROM processes WHERE started_ns >= ?");
    if (!st.ok()) return false;
    st.bind(1, since_ns);
    ours = st.step() == SQLITE_ROW && st.column_int(0) > 0;
  }
  if (!ours) return false;
  Statement st(db.handle(),
               "SELECT MAX(CAST(value AS INTEGER)) FROM run_info WHERE key = "
               "'torch.restart_count'");
  attempt = st.ok() && st.step() == SQLITE_ROW ? st.column_int(0) : 0;
  Statement window(db.handle(),
                   "SELECT message FROM notes WHERE topic = 'window' AND message LIKE "
                   "'the collection window never opened%' LIMIT 1");
  if (window.ok() && window.step() == SQLITE_ROW) window_unopened = window.column_text(0);
  return true;
}

}  // namespace

std::vector<RankFile> rank_files_written(const std::string& output, int64_t since_ns, int& others) {
  // This run's ranks' files are those of its run id: another job started at the same time with
  // the same -o wrote prof.rank0.<pid>.db beside them (a red-team run: each launcher named all
  // four files, and the merge it suggested refused them, 'not of the same run'). Without an id,
  // those written since this run started.
  std::vector<RankFile> found;
  std::error_code ec;
  fs::path out(output);
  // A launcher under an outer one (prof.launcher0.db): its ranks named theirs from prof.db.
  std::string name = fs::path(launcher_base(output)).filename().string();
  std::size_t dot = name.rfind('.');
  bool has_ext = dot != std::string::npos && dot > 0;
  std::string prefix = (has_ext ? name.substr(0, dot) : name) + ".rank";
  std::string suffix = has_ext ? name.substr(dot) : "";
  std::vector<std::string> runs;
  bool runs_read = false;  // read once a rank-named file is there
  auto deadline = std::chrono::steady_clock::now() + kPatience;
  fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string f = it->path().filename().string();
    if (f.size() <= prefix.size() + suffix.size() || !f.starts_with(prefix) || !f.ends_with(suffix))
      continue;
    std::string digits = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    // prof.rank3.db, or beside a rank file of an earlier run prof.rank3.<pid>.db (and
    // .<pid>-<n>, sonde/output_name.hpp): a rerun's rank files went unnamed.
    if (std::size_t d = digits.find('.'); d != std::string::npos) {
      std::string beside = digits.substr(d + 1);
      digits.resize(d);
      if (beside.empty() || beside.find_first_not_of("0123456789-") != std::string::npos ||
          beside.front() == '-' || beside.back() == '-')
        continue;
    }
    if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (!runs_read) {
      runs = run_ids_of(output, busy_ms_left(deadline));
      runs_read = true;
    }
    long attempt = 0;
    std::string window;
    if (of_this_run(it->path().string(), runs, since_ns, busy_ms_left(deadline), attempt, window))
      found.push_back({std::stol(digits), f, attempt, window});
    else
      ++others;
  }
  std::sort(found.begin(), found.end(), [](const RankFile& a, const RankFile& b) {
    return std::tie(a.attempt, a.rank, a.name) < std::tie(b.attempt, b.rank, b.name);
  });
  return found;
}

RankFilesSaid rank_files_said(const std::string& output, const std::string& requested,
                              int64_t since_ns) {
  int others = 0;
  auto all = rank_files_written(output, since_ns, others);
  if (all.empty()) return {};
  // torchrun restarted the ranks (--max_restarts): a file per rank per attempt, all of one run
  // id. Counted as files, they read "4 ranks" for 2, and the merge suggested refused them
  // ("both hold rank 0"); the attempt that ended the run is the last one's files.
  long last = all.back().attempt;
  std::vector<RankFile> ranks;
  for (const RankFile& r : all)
    if (r.attempt == last) ranks.push_back(r);
  bool restarted = ranks.size() < all.size();
  if (restarted) others += int(all.size() - ranks.size());  // the merge lists the last's files
  std::string dir = fs::path(requested).parent_path().string();
  auto shown = [&](const std::string& f) { return dir.empty() ? f : dir + "/" + f; };
  std::string files;
  if (ranks.size() <= 4) {
    for (const auto& r : ranks) files += (files.empty() ? "" : ", ") + shown(r.name);
  } else {
    files = fmt::format("{} to {}", shown(ranks.front().name), shown(ranks.back().name));
  }
  std::string attempts;
  if (restarted) {
    std::size_t n = 1;
    for (std::size_t i = 1; i < all.size(); ++i) n += all[i].attempt != all[i - 1].attempt;
    attempts = fmt::format(
        " in each of {} attempts (torchrun restarted them; {} files in all); the last "
        "attempt's",
        n, all.size());
  }
  // A rank's window that never opened is said by no rank (each joins its run quietly): the
  // launcher says it, once for all of them (the launcher's own window is no rank's).
  std::size_t unopened = 0;
  std::string example;
  for (const RankFile& r : ranks)
    if (!r.window_unopened.empty() && unopened++ == 0) example = r.window_unopened;
  std::string windows = unopened == 0 ? std::string()
                                      : fmt::format("sonde: in {} of the {} ranks' files, {}\n",
                                                    unopened, ranks.size(), example);
  if (ranks.size() == 1)
    return {fmt::format("sonde: 1 rank wrote its own file{}, {}\n", attempts, files) + windows,
            fmt::format("the launcher's own profile: the run's rank wrote its own file{}, {}",
                        attempts, files)};
  // "prof.rank0.db" made "prof.rank*.db" and "prof.merged.db".
  std::string first = rank_output(requested, 0);
  std::size_t tag = first.rfind(".rank0");
  // The pattern's star stays outside the quotes, so that the shell still expands it.
  std::string glob =
      shell_word(first.substr(0, tag) + ".rank") + "*" + shell_word(first.substr(tag + 6));
  // An earlier run's merge at that name (a second run into the same name) stopped the command
  // as printed ("exists; --force replaces it"): a free name is suggested, never --force.
  std::string merged_name = std::string(first).replace(tag, 6, ".merged");
  std::error_code ec;
  for (int n = 2; n < 1000 && fs::exists(merged_name, ec); ++n)
    merged_name = std::string(first).replace(tag, 6, fmt::format(".merged.{}", n));
  if (others > 0) {  // files of earlier runs match the pattern too: the merge names this run's
    glob.clear();
    for (const auto& r : ranks) glob += (glob.empty() ? "" : " ") + shell_word(shown(r.name));
  }
  std::string merge = fmt::format("sonde merge -o {} {}", shell_word(merged_name), glob);
  std::string read_as_one = restarted ? "to read that attempt as one" : "to read them as one";
  return {fmt::format("sonde: {} ranks wrote their own files{}, {}; {}: {}\n", ranks.size(),
                      attempts, files, read_as_one, merge) +
              windows,
          fmt::format("the launcher's own profile: the run's {} ranks wrote their own files{}, "
                      "{}; {}: {}",
                      ranks.size(), attempts, files, read_as_one, merge)};
}

void note_rank_files(const std::string& output, const std::string& message) {
  // One note, the last writer's: each process of a preloaded launcher (mpirun, its forks, the
  // `timeout` around it) notes what it finds at its exit, and `sonde run` around it after it
  // ended, naming the files as the user gave them (it replaces the launcher's absolute paths).
  // Inside the profiled process at its exit (runtime.cpp): a writer of the run still flushing
  // delays it 2 s at most, and a file at its `ulimit -f` costs the note, not the host's life.
  FileSizeSignalGuard no_sigxfsz;
  Database db;
  db.set_writer_patience(200, 2000);
  std::string error;
  if (!db.open(output, false, error)) return;
  Statement update(db.handle(),
                   "UPDATE notes SET message = ?2 WHERE topic = ?1 AND process_id IS NULL AND NOT "
                   "EXISTS (SELECT 1 FROM processes WHERE rank IS NOT NULL)");
  if (!update.ok()) return;
  update.bind(1, std::string_view(kRankFilesTopic)).bind(2, std::string_view(message));
  update.step();
  Statement insert(db.handle(),
                   "INSERT OR IGNORE INTO notes (run_id, process_id, severity, topic, message) "
                   "SELECT run_id, NULL, 'info', ?1, ?2 FROM runs WHERE NOT EXISTS (SELECT 1 FROM "
                   "processes WHERE rank IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM notes WHERE "
                   "topic = ?1 AND process_id IS NULL) LIMIT 1");
  if (!insert.ok()) return;
  insert.bind(1, std::string_view(kRankFilesTopic)).bind(2, std::string_view(message));
  insert.step();  // a file another writer holds stays as it is: the lines said on stderr remain
}

}  // namespace sonde
