#include "process/run_info.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

extern char** environ;

namespace sonde {

std::string read_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  return raw;
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

}  // namespace

RunInfo collect_run_info(const std::string& uuid, bool trace, int64_t started_ns) {
  RunInfo r;
  r.uuid = uuid;
  r.command = read_command_line();
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
  static const char* const kPrefixes[] = {"SONDE_", "OMP_",  "OPENBLAS_", "MKL_",
                                          "CUDA_",  "NCCL_", "PYTHON"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
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

std::string new_run_uuid() {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid()));
  uint64_t a = gen(), b = gen();
  return fmt::format("{:016x}{:016x}", a, b);
}

}  // namespace sonde
