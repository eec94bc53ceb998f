#include "process/run_info.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <string_view>

#include "core/proc_file.hpp"
#include "sonde/options.hpp"

extern char** environ;

namespace sonde {

std::vector<std::string> command_line_args() {
  std::string raw = read_proc_file("/proc/self/cmdline");
  std::vector<std::string> argv;
  for (size_t start = 0; start < raw.size();) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    argv.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

std::string read_command_line(bool with_args) {
  return redact_arguments(command_line_args(), with_args);
}

namespace {

// The first CPU's "model name" (x86; other architectures name none there): its record is the
// first, so 8 KB spares the kernel formatting every other CPU's (0.1 ms on 2 vCPUs).
std::string cpu_model() {
  std::string text = read_proc_file("/proc/cpuinfo", 8192);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    if (line.starts_with("model name")) {
      size_t colon = line.find(':');
      size_t value =
          colon == std::string_view::npos ? colon : line.find_first_not_of(' ', colon + 1);
      return value == std::string_view::npos ? "" : std::string(line.substr(value));
    }
    at = end + 1;
  }
  return "";
}

}  // namespace

RunInfo collect_run_info(const std::string& uuid, const std::string& command, bool trace,
                         int64_t started_ns) {
  RunInfo r;
  r.uuid = uuid;
  r.command = command;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.cpu_model = cpu_model();
  r.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  r.affinity_cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : r.cores;
  r.mode = trace ? "trace" : "profile";
  r.started_ns = started_ns;
  return r;
}

bool environment_allowed(const std::string& name) {
  // Names, not prefixes: a prefix lets PYTHON_API_TOKEN or any CUDA_* value of a site's own
  // travel with the profile. These are the variables that change how a run performs.
  static constexpr std::string_view kNames[] = {
      "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_SCHEDULE", "OMP_DYNAMIC",
      "OMP_WAIT_POLICY", "OMP_STACKSIZE", "OMP_MAX_ACTIVE_LEVELS", "OMP_THREAD_LIMIT",
      "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_MAIN_FREE", "OPENBLAS_VERBOSE",
      "GOTO_NUM_THREADS", "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_CBWR", "MKL_THREADING_LAYER",
      "MKL_INTERFACE_LAYER", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE",
      "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
      "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_CACHE_DISABLE", "CUBLAS_WORKSPACE_CONFIG",
      "CUDNN_LOGINFO_DBG", "NCCL_DEBUG", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NTHREADS",
      "NCCL_BUFFSIZE", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
      "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "PYTHONHASHSEED", "PYTHONOPTIMIZE",
      "PYTHONMALLOC", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONFAULTHANDLER",
      "PYTHONDEVMODE", "PYTHONPERFSUPPORT", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
      "PMI_RANK", "PMI_SIZE", "WORLD_SIZE", "RANK", "LOCAL_RANK",
      // The ranks on this host, which share its cores (the advice's threads per rank).
      "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"};
  if (name_looks_secret(name)) return false;
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  // sonde's own settings, except those that carry identifiers between its processes.
  return std::any_of(kOptionSpecs.begin(), kOptionSpecs.end(),
                     [&](const OptionSpec& s) { return s.name == name && !s.internal; });
}

std::vector<std::pair<std::string, std::string>> allowed_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (environment_allowed(name)) out.emplace_back("env." + name, entry.substr(eq + 1));
  }
  return out;
}

std::string job_run_uuid(const std::string& job) {
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : job) h = (h ^ c) * 0x100000001b3ull;
    return h;
  };
  return fmt::format("{:016x}{:016x}", fnv(0xcbf29ce484222325ull), fnv(0x84222325cbf29ce4ull));
}

std::string new_run_uuid() {
  // The kernel's random bytes (one system call). Where there are none yet (early at boot), the
  // clock, the process and an address seed a generator; std::random_device would bring
  // libstdc++'s arc4random call, which glibc has only from 2.36 (the wheel runs on 2.31).
  uint64_t ab[2] = {};
  if (getrandom(ab, sizeof ab, GRND_NONBLOCK) != ssize_t(sizeof ab)) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    std::mt19937_64 gen((uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec)) ^
                        (uint64_t(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&ts));
    ab[0] = gen();
    ab[1] = gen();
  }
  return fmt::format("{:016x}{:016x}", ab[0], ab[1]);
}

}  // namespace sonde
