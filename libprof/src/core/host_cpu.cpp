#include "core/host_cpu.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/proc_file.hpp"

namespace sonde {

std::optional<double> host_busy_cpu_s() {
  std::string stat = read_proc_file("/proc/stat", 256);
  if (stat.compare(0, 4, "cpu ") != 0) return std::nullopt;
  long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return std::nullopt;
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is in user).
  const char* p = stat.c_str() + 4;
  double busy = 0;
  for (int field = 0; field < 8; ++field) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return std::nullopt;
    if (field != 3 && field != 4) busy += double(v);
    p = end;
  }
  return busy / double(ticks_per_s);
}

}  // namespace sonde
