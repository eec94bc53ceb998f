#include "core/host_cpu.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/proc_file.hpp"

namespace sonde {

std::optional<double> host_busy_cpu_s(const cpu_set_t& cpus) {
  // A line a CPU (cpuN user nice system idle iowait irq softirq steal guest guest_nice; guest is
  // in user), after the host's total; the rest of the file (intr, ctxt, ...) is not read.
  std::string stat = read_proc_file("/proc/stat", std::size_t(1) << 20);
  long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return std::nullopt;
  double busy = 0;
  bool any = false;
  for (std::size_t at = 0; at < stat.size();) {
    std::size_t end = stat.find('\n', at);
    if (end == std::string::npos) end = stat.size();
    const char* line = stat.c_str() + at;
    at = end + 1;
    if (std::strncmp(line, "cpu", 3) != 0) break;  // past the CPUs' lines
    if (line[3] == ' ') continue;                  // the host's total
    char* p = nullptr;
    long cpu = std::strtol(line + 3, &p, 10);
    if (p == line + 3 || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &cpus)) continue;
    double mine = 0;
    for (int field = 0; field < 8; ++field) {
      char* next = nullptr;
      unsigned long long v = std::strtoull(p, &next, 10);
      if (next == p) return std::nullopt;
      if (field != 3 && field != 4) mine += double(v);
      p = next;
    }
    busy += mine;
    any = true;
  }
  if (!any) return std::nullopt;
  return busy / double(ticks_per_s);
}

std::optional<double> thread_runq_wait_s(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", int(tid));
  std::string text = read_proc_file(path, 128);
  unsigned long long on_cpu = 0, waiting = 0;
  if (std::sscanf(text.c_str(), "%llu %llu", &on_cpu, &waiting) != 2) return std::nullopt;
  return 1e-9 * double(waiting);
}

}  // namespace sonde
