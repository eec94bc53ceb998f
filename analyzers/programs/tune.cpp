#include "programs/tune.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

#include "advice/candidates.hpp"
#include "advice/thread_rules.hpp"
#include "advice/tune_results.hpp"
#include "base/signal_name.hpp"
#include "metrics/blas_kernels.hpp"
#include "metrics/breakdown.hpp"
#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"
#include "programs/launcher.hpp"
#include "programs/python_package.hpp"
#include "sonde/preload_path.hpp"

namespace sonde::analyzers {
namespace fs = std::filesystem;
namespace {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Every stage is a set of environment variables: what a user would set by hand, so the table's
// knobs column is the recipe.
std::vector<Knob> stage_knobs(const std::string& name, int cores) {
  std::string n = std::to_string(cores);
  if (name == "blas-threads")
    return {{"OPENBLAS_NUM_THREADS", n}, {"MKL_NUM_THREADS", n}, {"OMP_NUM_THREADS", n}};
  // torch takes its intra-op thread count from OMP_NUM_THREADS (then MKL_NUM_THREADS), unless
  // the program calls torch.set_num_threads itself (most training scripts, torch_cnn among
  // them): SONDE_TORCH_THREADS holds the pool at the count against that call.
  if (name == "framework-threads")
    return {{"OMP_NUM_THREADS", n}, {"MKL_NUM_THREADS", n}, {"SONDE_TORCH_THREADS", n}};
  if (name == "ftz") return {{"SONDE_FTZ", "1"}};
  if (name == "pinning") return {{"OMP_PROC_BIND", "close"}, {"OMP_PLACES", "cores"}};
  return {};
}

// The OPENBLAS_CORETYPE the blas-kernels stage sets (the blas-kernels rule's advice, measured):
// the core of the CPU's widest vectors, where the original's OpenBLAS chose narrower kernels
// by the CPU's model (Debian 12's 0.3.21 runs its SSE3 Prescott ones on Sapphire and Emerald
// Rapids); else why the stage cannot change anything.
struct CoreType {
  std::string name, why_not;
};

CoreType blas_coretype(const std::optional<AdviceInput>& in) {
  if (!in) return {"", "no profile of the original to read its BLAS from"};
  const auto& info = in->metrics.facts.info;
  auto config = info.find("blas.config");
  auto cpu = info.find("cpu.vector_isa");
  auto kernels = config != info.end() ? openblas_kernels(config->second) : std::nullopt;
  if (!kernels) return {"", "the original's BLAS is no OpenBLAS that names its kernels"};
  if (!kernels->dynamic_arch)
    return {"", fmt::format("this OpenBLAS was built for {} alone (no DYNAMIC_ARCH): it reads "
                            "no OPENBLAS_CORETYPE",
                            kernels->core)};
  if (cpu == info.end() || vector_bits(cpu->second) == 0)
    return {"",
            "the original's profile does not say the CPU's vectors (run_info "
            "cpu.vector_isa)"};
  if (!kernels_narrower(*kernels, cpu->second))
    return {"", fmt::format("OpenBLAS already ran its {} kernels, as wide as the CPU's vectors",
                            kernels->core)};
  std::string core = coretype_for(cpu->second);
  if (core.empty()) return {"", "no OpenBLAS core type for the CPU's vectors"};
  return {core, ""};
}

// The threads the original's pools ran (its profile's facts), for not_applicable.
struct OriginalThreads {
  std::optional<std::int64_t> blas, torch;
  // run_info openmp.runtime of the original's profile: OMP_PROC_BIND and OMP_PLACES act only
  // through an OpenMP runtime. Absent where the profile was not read (unknown: the stage runs).
  std::optional<bool> openmp;
};

OriginalThreads original_threads(const AdviceInput& in) {
  OriginalThreads t{in.metrics.facts.blas_threads, std::nullopt, std::nullopt};
  if (auto it = in.metrics.facts.info.find("torch.num_threads"); it != in.metrics.facts.info.end())
    if (std::int64_t n = std::atoll(it->second.c_str()); n > 0) t.torch = n;
  // Written by the libsonde that profiled the original here, which records the key where a
  // runtime is loaded: its absence is none.
  t.openmp = in.metrics.facts.info.count("openmp.runtime") > 0;
  return t;
}

// Why a stage cannot change anything here, or "".
std::string not_applicable(const std::string& name, int cores, int target,
                           const std::vector<Knob>& knobs, const OriginalThreads& original) {
  if ((name == "blas-threads" || name == "framework-threads" || name == "pinning") && cores < 2)
    return "one core";
  // A red-team numpy program on OpenBLAS's pthreads build read "pinning 1.32x faster, measured
  // gain 0.213 s" on noise: no library of its process reads the variables (two reruns: 0.94x,
  // 1.19x, in the noise).
  if (name == "pinning" && original.openmp && !*original.openmp)
    return "no OpenMP runtime was loaded (libgomp, libiomp5, libomp): no library of the "
           "program reads OMP_PROC_BIND or OMP_PLACES";
  // The BLAS (the pool torch runs) already at the count the stage would set: its one effect
  // would be its OMP_NUM_THREADS on the other pool, the other stage's test (a red-team torch run
  // spent most of a 10-minute tune on a blas-threads stage of 0.000 s estimated gain, at 0.17x).
  for (auto [stage, ran, what] :
       {std::tuple{"blas-threads", original.blas, "the BLAS"},
        std::tuple{"framework-threads", original.torch, "torch's intra-op pool"}}) {
    if (name != stage) continue;
    if (ran && *ran == target)
      return target == cores
                 ? fmt::format("{} already ran {} threads on the {} cores", what, *ran, cores)
                 : fmt::format("{} already ran {} threads, the cores the DataLoader workers left",
                               what, *ran);
  }
  bool all_set = !knobs.empty() && std::all_of(knobs.begin(), knobs.end(), [](const Knob& k) {
    return env_or(k.variable.c_str(), "") == k.value;
  });
  return all_set ? "already set in the environment" : "";
}

// The Python hook's folder when the command is a Python interpreter, so that its frames are
// recorded as under `python3 -m sonde`: the folders `sonde run --python` puts on PYTHONPATH,
// found beside the library as it finds them (a build tree, an install, a wheel).
std::string python_path_for(const std::vector<std::string>& command, const std::string& library) {
  std::string base = fs::path(command[0]).filename().string();
  if (base.rfind("python", 0) != 0) return "";
  std::string package = find_python_package(library);
  return package.empty() ? "" : autostart_python_path(package);
}

struct Launch {
  std::vector<std::string> command;
  std::string library;
  std::string python_path;
  double timeout_s = 0;
};

void redirect(const std::string& path, int fd) {
  int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f >= 0) {
    ::dup2(f, fd);
    ::close(f);
  }
}

// Set by tune's handler of SIGINT, SIGTERM and SIGHUP: each run is in a process group of its
// own, which a terminal's Ctrl-C, `timeout` and a scheduler never reach, and a red-team
// interrupted tune left the program running with parent 1, its finished runs unreported.
volatile std::sig_atomic_t g_interrupted = 0;

void note_interrupt(int sig) { g_interrupted = sig; }

// The handlers while tune runs, the previous ones back after.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = note_interrupt;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~InterruptGuard() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

// The CPU time of the run's busy threads (thread_times.cpu_s of the threads with measured
// calls, every process of the run), where the kernel's clock of each was read: the process's
// rusage counts its idle pool threads too, and an OpenBLAS pool thread spinning in sched_yield
// while the other core was free read 0.365 and 0.681 s in two runs of one 0.36 s wall time (a
// red team's blas-kernels stage, its GEMMs 6 times faster, was "refuted" so). None: rusage.
std::optional<double> busy_threads_cpu_s(const std::string& profile) {
  try {
    ProfileFile f = ProfileFile::open(profile);
    auto st = f.prepare(
        "SELECT SUM(cpu_s), COUNT(*) > 0 AND COUNT(cpu_s) = COUNT(*) FROM thread_times "
        "WHERE busy");
    if (st.step() && !st.is_null(0) && st.int64(1) != 0) return st.real(0);
  } catch (const std::exception&) {  // no profile, or one cut short: the process's figure
  }
  return std::nullopt;
}

TuneRun run_once(const Launch& l, const std::vector<Knob>& knobs, const fs::path& dir,
                 const std::string& stem) {
  TuneRun r;
  r.profile = (dir / (stem + ".db")).string();
  r.stdout_path = (dir / (stem + ".out")).string();
  r.stderr_path = (dir / (stem + ".err")).string();
  for (const char* suffix : {"", "-journal", "-wal", "-shm"})
    ::unlink((r.profile + suffix).c_str());

  std::vector<char*> argv;
  for (const auto& arg : l.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::string why;
  std::string preloadable = preloadable_path(l.library, &why);
  if (preloadable.empty())
    throw Error(fmt::format("sonde tune: cannot preload {}: {}", l.library, why));
  auto start = std::chrono::steady_clock::now();
  pid_t child = ::fork();
  if (child < 0) throw Error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (child == 0) {
    ::setpgid(0, 0);  // a timeout ends the command's children too
    // And tune's own end, even by SIGKILL, ends the command (the one process it started; a
    // handled interrupt ends the whole group below).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    redirect(r.stdout_path, STDOUT_FILENO);
    redirect(r.stderr_path, STDERR_FILENO);
    std::string preload = preloadable;
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::setenv("SONDE_OUTPUT", r.profile.c_str(), 1);
    ::unsetenv("SONDE_RUN_ID");
    ::unsetenv("SONDE_UNPROFILED");
    ::unsetenv("SONDE_FTZ");  // the original runs as the program would, whatever the shell says
    if (!l.python_path.empty()) ::setenv("PYTHONPATH", l.python_path.c_str(), 1);
    for (const Knob& k : knobs) ::setenv(k.variable.c_str(), k.value.c_str(), 1);
    ::execvp(argv[0], argv.data());
    std::string msg =
        fmt::format("sonde tune: cannot execute {}: {}\n", l.command[0], std::strerror(errno));
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  int status = 0;
  bool timed_out = false, stopping = false;
  struct rusage usage {};
  for (;;) {
    pid_t got = ::wait4(child, &status, WNOHANG, &usage);
    if (got == child) break;
    if (got < 0 && errno != EINTR) throw Error(fmt::format("waitpid: {}", std::strerror(errno)));
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timed_out = timed_out || (l.timeout_s > 0 && elapsed > l.timeout_s);
    if ((timed_out || g_interrupted) && !stopping) {
      stopping = true;  // SIGTERM lets sonde flush; SIGKILL two seconds later if it does not end
      ::kill(-child, SIGTERM);
      std::thread([child] {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        ::kill(-child, SIGKILL);
      }).detach();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + t.tv_usec / 1e6; };
  r.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  if (g_interrupted && !timed_out)
    r.ended = "interrupted by " + signal_name(g_interrupted);
  else if (timed_out)
    r.ended = fmt::format("timed out after {:g} s", l.timeout_s);
  else if (WIFSIGNALED(status))
    r.ended = "killed by " + signal_name(WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0)
    r.ended = fmt::format("exit {}", WEXITSTATUS(status));
  r.ok = r.ended.empty();
  if (r.ok)
    if (std::optional<double> busy = busy_threads_cpu_s(r.profile)) r.cpu_s = *busy;
  return r;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct RoutineKey {
  std::string kind, library, file, name;
  std::int64_t line = 0;
  auto operator<=>(const RoutineKey&) const = default;
};

// The original's top routines by exclusive time (the hotspots view): the phase columns.
std::vector<std::pair<std::string, RoutineKey>> top_routines(const std::string& profile, int n) {
  std::vector<std::pair<std::string, RoutineKey>> out;
  ProfileFile f = ProfileFile::open(profile);
  auto st = f.prepare(
      "SELECT routine, kind, COALESCE(library, ''), COALESCE(file, ''), "
      "COALESCE(line, 0) FROM hotspots ORDER BY excl_s DESC LIMIT ?");
  st.bind(1, std::int64_t{n});
  while (st.step())
    out.push_back(
        {st.text(0), RoutineKey{st.text(1), st.text(2), st.text(3), st.text(0), st.int64(4)}});
  return out;
}

double routine_excl_s(const ProfileFile& f, const RoutineKey& key) {
  auto st = f.prepare(
      "SELECT COALESCE(SUM(excl_s), 0) FROM hotspots WHERE routine = ? AND kind = ? "
      "AND COALESCE(library, '') = ? AND COALESCE(file, '') = ? "
      "AND COALESCE(line, 0) = ?");
  st.bind(1, key.name).bind(2, key.kind).bind(3, key.library).bind(4, key.file).bind(5, key.line);
  return st.step() ? st.real(0) : 0.0;
}

// The phase columns: the training loop's breakdown (forward, backward, update, other) where
// sonde finds one in the original, else the original's top routines by exclusive time.
struct PhaseSource {
  bool breakdown = false;
  std::vector<std::string> names;
  std::vector<RoutineKey> routines;  // when not breakdown, one per name
};

std::map<std::string, double> breakdown_phases(const ProfileFile& f) {
  std::map<std::string, double> out;
  Breakdown b = compute_breakdown(f, {});
  if (!b.found) return out;
  for (const BreakdownRow& row : b.rows)
    if (row.known && row.time_ns > 0) out[row.title] = row.time_ns / 1e9;
  out["other"] = b.other_ns / 1e9;
  return out;
}

PhaseSource choose_phases(const std::string& profile) {
  PhaseSource src;
  ProfileFile f = ProfileFile::open(profile);
  Breakdown b = compute_breakdown(f, {});
  if (b.found) {
    src.breakdown = true;
    for (const BreakdownRow& row : b.rows)
      if (row.known && row.time_ns > 0) src.names.push_back(row.title);
    src.names.push_back("other");
    return src;
  }
  for (auto& [shown, key] : top_routines(profile, 3)) {
    src.names.push_back(shown);
    src.routines.push_back(key);
  }
  return src;
}

std::map<std::string, double> phase_times(const std::string& profile, const PhaseSource& src) {
  ProfileFile f = ProfileFile::open(profile);
  if (src.breakdown) return breakdown_phases(f);
  std::map<std::string, double> out;
  for (std::size_t i = 0; i < src.names.size(); ++i)
    out[src.names[i]] = routine_excl_s(f, src.routines[i]);
  return out;
}

bool recorded_torch(const std::string& profile) {
  ProfileFile f = ProfileFile::open(profile);
  auto st = f.prepare("SELECT 1 FROM run_info WHERE key = 'torch.num_threads' LIMIT 1");
  return st.step();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<double> walls(const TuneStage& s, bool cpu = false) {
  std::vector<double> w;
  for (const TuneRun& r : s.runs)
    if (r.ok) w.push_back(cpu ? r.cpu_s : r.wall_s);
  return w;
}

// Thread counts change CPU time without changing the work done: those stages are judged on wall.
bool judged_by_cpu(const std::vector<Knob>& knobs) {
  return std::none_of(knobs.begin(), knobs.end(), [](const Knob& k) {
    return k.variable.find("NUM_THREADS") != std::string::npos || k.variable.rfind("OMP_", 0) == 0;
  });
}

void summarise(TuneStage& s, const PhaseSource& phases) {
  std::vector<double> w = walls(s);
  if (w.empty()) return;
  s.median_s = median(w);
  s.min_s = *std::min_element(w.begin(), w.end());
  s.max_s = *std::max_element(w.begin(), w.end());
  std::vector<double> c = walls(s, true);
  s.cpu_median_s = median(c);
  s.cpu_min_s = *std::min_element(c.begin(), c.end());
  s.cpu_max_s = *std::max_element(c.begin(), c.end());
  std::map<std::string, std::vector<double>> per_phase;
  for (const TuneRun& r : s.runs) {
    if (!r.ok) continue;
    try {
      for (const auto& [name, t] : phase_times(r.profile, phases)) per_phase[name].push_back(t);
    } catch (const Error&) {  // a run that wrote no readable profile has no phases
    }
  }
  for (const std::string& name : phases.names)
    if (auto it = per_phase.find(name); it != per_phase.end()) s.phases[name] = median(it->second);
}

// Of two comparisons, the one farther from the original: a difference beyond the tolerance
// first, then the larger relative difference.
bool farther(const OutputComparison& a, const OutputComparison& b) {
  auto key = [](const OutputComparison& c) {
    return std::make_tuple(c.differs(), c.beyond + c.word_lines, c.largest_rel);
  };
  return key(a) > key(b);
}

// The stage's output against the original's: it differs only where a run of it matches no run
// of the original within the tolerance (a program whose own output varies is not blamed on the
// stage). Each run is held against its nearest original run; the stage's figure is its farthest
// run's.
// Numbers that vary among the original's own runs (timings printed with no name that says so)
// are left out of every comparison: "bwd+step 0.006" against 0.007 read as a stage changing the
// program's results (a red-team find), its loss the same.
// FTZ changes exactly the numbers of tiny magnitude, which the absolute tolerance (a 0 against
// a -1.3e-17 that another summing order left) called equal: a program's one result, 1.68e-34,
// printed 0.0 under the ftz stage, and tune called the output the same (a red-team find). A
// stage that sets SONDE_FTZ holds every number to the relative tolerance alone.
OutputTolerance stage_tolerance(const std::vector<Knob>& knobs) {
  OutputTolerance tol;
  for (const Knob& k : knobs)
    if (k.variable == "SONDE_FTZ") tol.abs = 0;
  return tol;
}

void compare_with_original(TuneStage& s, const TuneStage& original) {
  OutputTolerance tol = stage_tolerance(s.knobs);
  std::vector<std::string> originals;
  for (const TuneRun& o : original.runs)
    if (o.ok) originals.push_back(read_text(o.stdout_path));
  if (originals.empty()) return;
  VaryingPlaces varying = varying_places(originals);
  for (const TuneRun& r : s.runs) {
    if (!r.ok) continue;
    std::string mine = read_text(r.stdout_path);
    std::optional<OutputComparison> nearest;
    for (const std::string& o : originals) {
      OutputComparison c = compare_outputs(o, mine, tol, varying);
      if (!nearest || farther(*nearest, c)) nearest = c;
    }
    if (!s.output || farther(*nearest, *s.output)) s.output = nearest;
  }
  if (!s.output) return;
  s.output_changed = s.output->differs();
  if (s.output_changed) s.output_difference = output_detail(*s.output);
}

// The facts a stage's knobs may move besides what they are for, from a run's profile.
std::map<std::string, std::string> run_facts(const std::string& profile) {
  std::map<std::string, std::string> facts;
  try {
    ProfileFile f = ProfileFile::open(profile);
    RunSummary r = load_run_summary(f);
    if (r.blas_threads) facts["the BLAS's threads"] = *r.blas_threads;
    if (r.torch_threads) facts["torch's intra-op threads"] = *r.torch_threads;
    // As of the root's last flush (a binding made after start), else as at its start.
    auto st = f.prepare(
        "SELECT value FROM (SELECT i.value, 0 AS o FROM run_info i JOIN processes p USING "
        "(process_id) WHERE i.key = 'process.affinity_cores' AND p.origin = 'root' UNION ALL "
        "SELECT CAST(affinity_cores AS TEXT), 1 FROM runs WHERE affinity_cores IS NOT NULL) "
        "ORDER BY o LIMIT 1");
    if (st.step() && !st.is_null(0)) facts["the CPUs the process could run on"] = st.text(0);
  } catch (const Error&) {  // a run that wrote no readable profile says nothing
  }
  return facts;
}

// What the stage's first run records otherwise than the original's first, but for the one fact
// the stage is meant to move.
void find_side_effects(TuneStage& s, const TuneStage& original) {
  auto first_ok = [](const TuneStage& t) -> const TuneRun* {
    for (const TuneRun& r : t.runs)
      if (r.ok) return &r;
    return nullptr;
  };
  const TuneRun* mine = first_ok(s);
  const TuneRun* theirs = first_ok(original);
  if (mine == nullptr || theirs == nullptr) return;
  std::string meant = s.name == "blas-threads"        ? "the BLAS's threads"
                      : s.name == "framework-threads" ? "torch's intra-op threads"
                                                      : "";
  std::map<std::string, std::string> before = run_facts(theirs->profile);
  for (const auto& [what, value] : run_facts(mine->profile)) {
    auto it = before.find(what);
    if (what != meant && it != before.end() && it->second != value)
      s.side_effects.push_back(fmt::format("{}: {} ({})", what, value, it->second));
  }
}

// The original's own runs against its first: a program whose output varies from run to run
// (an unseeded shuffle) makes every stage's comparison weaker, and the table should say so.
// Numbers alone varying in lines otherwise alike are taken as timings and left out (said so); a
// line's words or the number of lines varying is an unseeded program.
std::string original_varies(const TuneStage& original) {
  if (original.runs.empty() || !original.runs[0].ok) return "";
  std::vector<std::string> outputs{read_text(original.runs[0].stdout_path)};
  for (std::size_t i = 1; i < original.runs.size(); ++i)
    if (original.runs[i].ok) outputs.push_back(read_text(original.runs[i].stdout_path));
  VaryingPlaces varying = varying_places(outputs);
  for (std::size_t i = 1; i < original.runs.size(); ++i) {
    if (!original.runs[i].ok) continue;
    OutputComparison c =
        compare_outputs(outputs[0], read_text(original.runs[i].stdout_path), {}, varying);
    if (c.differs())
      return fmt::format(
          "the original's own output varies from run to run (run {} against run "
          "1: {}): a stage is said to differ only where a run of it matches no "
          "original run; seed the program to compare its results",
          i + 1, output_detail(c));
  }
  std::string out;
  if (!varying.left_out.empty())
    out = fmt::format(
        "{} number{} of the original's output vary from run to run in lines otherwise alike "
        "(timings printed with no name or unit that says so, as 'fwd 0.003'): left out of every "
        "stage's comparison, as timings are",
        varying.left_out.size(), varying.left_out.size() == 1 ? "" : "s");
  if (!varying.bands.empty())
    out += fmt::format(
        "{}{} result{} of the original's output (a loss, an accuracy) vary from run to run: "
        "a stage's is held to the range its runs span, and differs beyond it",
        out.empty() ? "" : "; ", varying.bands.size(), varying.bands.size() == 1 ? "" : "s");
  return out;
}

}  // namespace

std::vector<std::string> tune_stage_names() {
  return {"blas-threads", "framework-threads", "blas-kernels", "ftz", "pinning", "all"};
}

TuneResult run_tune(const TuneOptions& o) {
  if (o.command.empty()) throw Error("no command given (sonde tune [options] -- COMMAND ...)", 2);
  command_to_start(o.command[0]);  // 126 or 127, as sonde run
  TuneResult result;
  result.command = o.command;
  result.repeat = o.repeat;
  result.cores = usable_cores();
  result.output_dir = o.output_dir;
  fs::path dir = absolute_output(o.output_dir, "the runs' folder");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error(fmt::format("cannot create {}: {}", o.output_dir, ec.message()));
  std::string library = find_preload_library();
  Launch launch{o.command, library, python_path_for(o.command, library), o.timeout_s};
  if (fs::path(o.command[0]).filename().string().rfind("python", 0) == 0 &&
      launch.python_path.empty())
    result.notes.push_back(
        "the Python hook's folder was not found beside sonde: native calls only");

  InterruptGuard interrupts;
  TuneStage original;
  original.name = "original";
  auto progress = [](const std::string& stage, int round, const TuneRun& r) {
    fmt::print(stderr, "sonde tune: {} run {}: {:.3f} s{}\n", stage, round, r.wall_s,
               r.ok ? "" : " (" + r.ended + ")");
  };
  // The first original run decides what the others are compared on; a program that fails as it
  // is cannot be tuned.
  original.runs.push_back(run_once(launch, {}, dir, "original.1"));
  progress("original", 1, original.runs.back());
  if (g_interrupted)
    throw Error(fmt::format("interrupted by {} during the original's first run: nothing measured",
                            signal_name(g_interrupted)),
                128 + g_interrupted);
  if (!original.runs.back().ok)
    throw Error(
        fmt::format("the command failed as it is ({}; its output is in {}): nothing to "
                    "compare the stages with",
                    original.runs.back().ended, original.runs.back().stderr_path));
  PhaseSource phases = choose_phases(original.runs[0].profile);
  result.phase_names = phases.names;

  std::vector<std::string> names = o.stages;
  bool all_asked = names.empty();
  if (names.empty()) {
    names = {"blas-threads", "ftz", "pinning"};
    if (recorded_torch(original.runs[0].profile))
      names.insert(names.begin() + 1, "framework-threads");
  } else {
    all_asked = std::erase(names, std::string("all")) > 0;
  }
  // The thread count the thread stages set: the cores, less the DataLoader workers busy at once
  // (a BLAS on every core beside a busy worker ran its GEMMs 9 times slower than on the one
  // core left: the stage only ever raised the count, and was skipped there as at the cores).
  int threads_target = result.cores;
  // The original's first profile, read once: its pools' threads and workers here, the rules'
  // estimates below.
  std::optional<AdviceInput> original_input;
  try {
    original_input = load_advice_input(ProfileFile::open(original.runs[0].profile));
    // A cgroup's CPU quota holds the threads to fewer cores than the mask names (a pod of 4
    // CPUs on a 64-core node): the stages set the count the advice names, from the profile's
    // facts, not the mask's 64.
    const RunFacts& facts = original_input->metrics.facts;
    if (auto n = facts.available_cores(); n && facts.quota_binds() && *n < result.cores) {
      result.notes.push_back(fmt::format(
          "the cgroup's CPU quota ({:.2f} cores) holds the thread stages to {} of the {} CPUs "
          "the process may run on",
          *facts.cpu_quota, *n, result.cores));
      result.cores = int(*n);
      threads_target = result.cores;
    }
    if (auto free = cores_beside_workers(*original_input))
      threads_target = int(std::min<std::int64_t>(*free, result.cores));
  } catch (const Error& e) {  // no readable profile: the cores, and no estimates
    result.notes.push_back(fmt::format("no estimates: {}", e.what()));
  }
  OriginalThreads ran = original_input ? original_threads(*original_input) : OriginalThreads{};
  CoreType coretype = blas_coretype(original_input);
  // By default where it can change something, before ftz (which comes after the threads).
  if (o.stages.empty() && !coretype.name.empty())
    names.insert(std::find(names.begin(), names.end(), std::string("ftz")), "blas-kernels");
  std::vector<TuneStage> stages;
  for (const std::string& name : names) {
    TuneStage s;
    s.name = name;
    s.knobs = name == "blas-kernels" ? std::vector<Knob>{} : stage_knobs(name, threads_target);
    if (name == "blas-kernels" && !coretype.name.empty())
      s.knobs = {{"OPENBLAS_CORETYPE", coretype.name}};
    s.rule = rule_of_stage(name);
    std::string why = name == "blas-kernels" ? coretype.why_not : "";
    if (why.empty()) why = not_applicable(name, result.cores, threads_target, s.knobs, ran);
    if (!why.empty()) {
      s.status = "skipped";
      s.reason = why;
    }
    stages.push_back(std::move(s));
  }

  // Round 1's original ran above; each later round starts with one.
  // A run an interrupt cut short is no measurement: dropped, as the runs never started.
  auto interrupted = [&](TuneStage& s) {
    if (!g_interrupted) return false;
    if (!s.runs.empty() && !s.runs.back().ok) {
      s.runs.pop_back();
      if (s.runs.empty() && s.name != "original") {
        s.status = "skipped";
        s.reason = "interrupted during its first run";
      }
    }
    return true;
  };
  auto round_of = [&](std::vector<TuneStage*> group, int round) {
    if (g_interrupted) return;
    if (round > 1) {
      original.runs.push_back(
          run_once(launch, {}, dir, fmt::format("original.{}", original.runs.size() + 1)));
      progress("original", int(original.runs.size()), original.runs.back());
      if (interrupted(original)) return;
    }
    for (TuneStage* s : group) {
      if (s->status != "ran") continue;
      s->runs.push_back(run_once(launch, s->knobs, dir, fmt::format("{}.{}", s->name, round)));
      progress(s->name, round, s->runs.back());
      if (interrupted(*s)) return;
      if (!s->runs.back().ok) {  // reported once, never retried
        s->status = "failed";
        s->reason = fmt::format("{} (see {})", s->runs.back().ended, s->runs.back().stderr_path);
      }
    }
  };
  std::vector<TuneStage*> group;
  for (TuneStage& s : stages) group.push_back(&s);
  for (int round = 1; round <= o.repeat; ++round) round_of(group, round);
  if (g_interrupted) {
    result.interrupted_by = g_interrupted;
    std::size_t done = original.runs.size();
    for (TuneStage& s : stages) {
      done += s.runs.size();
      if (s.status == "ran" && s.runs.empty()) {
        s.status = "skipped";
        s.reason = "interrupted before it ran";
      }
    }
    result.notes.push_back(fmt::format(
        "interrupted by {} after {} complete run{}: the stages' figures are of those runs, "
        "fewer than --repeat {} asked",
        signal_name(g_interrupted), done, done == 1 ? "" : "s", o.repeat));
  }

  auto judge = [&](TuneStage& s) {
    summarise(s, phases);
    if (s.status != "ran") return;
    s.by_cpu = judged_by_cpu(s.knobs);
    std::vector<double> base = walls(original, s.by_cpu), mine = walls(s, s.by_cpu);
    double m = median(mine);
    s.speedup = m > 0 ? std::optional(median(base) / m) : std::nullopt;
    s.verdict = tune_verdict(base, mine);
    s.smallest_gain_s = std::max(kTuneMinSeconds, kTuneMinEffect * median(base));
    if (s.verdict != Verdict::kNone) s.measured_gain_s = median(base) - m;
    compare_with_original(s, original);
    find_side_effects(s, original);
  };
  for (TuneStage& s : stages) judge(s);

  if (all_asked && !g_interrupted) {
    TuneStage all;
    all.name = "all";
    std::vector<std::string> helped;
    for (const TuneStage& s : stages) {
      if (s.status != "ran" || s.verdict != Verdict::kFaster) continue;
      helped.push_back(s.name);
      for (const Knob& k : s.knobs) {
        std::erase_if(all.knobs, [&](const Knob& a) { return a.variable == k.variable; });
        all.knobs.push_back(k);
      }
    }
    if (helped.size() < 2) {
      all.status = "skipped";
      all.reason = helped.empty() ? "no stage was faster beyond the noise"
                                  : "only " + helped[0] + " was faster: the same runs";
    } else {
      std::size_t before = original.runs.size();
      for (int round = 1; round <= o.repeat && !g_interrupted; ++round) {
        original.runs.push_back(run_once(launch, {}, dir, fmt::format("original.{}", ++before)));
        progress("original", int(before), original.runs.back());
        if (interrupted(original)) break;
        all.runs.push_back(run_once(launch, all.knobs, dir, fmt::format("all.{}", round)));
        progress("all", round, all.runs.back());
        if (interrupted(all)) break;
        if (!all.runs.back().ok) {
          all.status = "failed";
          all.reason =
              fmt::format("{} (see {})", all.runs.back().ended, all.runs.back().stderr_path);
          break;
        }
      }
      judge(all);
    }
    stages.push_back(std::move(all));
    if (g_interrupted) {
      result.interrupted_by = g_interrupted;
      result.notes.push_back(
          fmt::format("interrupted by {} during the stage all: its figures "
                      "are of the runs that completed",
                      signal_name(g_interrupted)));
    }
  }

  // The original's own figures, from every run it made (the rounds of all included).
  summarise(original, phases);
  if (std::string varies = original_varies(original); !varies.empty())
    result.notes.push_back(varies);
  original.speedup = 1.0;
  for (const TuneRun& r : original.runs) {
    if (!r.ok)
      result.notes.push_back(fmt::format("an original run ended {} (see {}); its time is left out",
                                         r.ended, r.stderr_path));
  }
  // The estimates the stages test, from the original's first profile.
  if (original_input) {
    std::vector<Candidate> candidates = evaluate_rules(*original_input, rules());
    for (TuneStage& s : stages) {
      if (s.rule.empty()) continue;
      double est = 0;
      for (const Candidate& c : candidates)
        if (c.rule == s.rule) est += c.est_gain_s;
      s.estimated_gain_s = est;
    }
  }
  result.stages.push_back(std::move(original));
  for (TuneStage& s : stages) result.stages.push_back(std::move(s));
  return result;
}

}  // namespace sonde::analyzers
