#include "core/cpu_quota.hpp"

#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/proc_file.hpp"

namespace sonde {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    size_t end = text.find(sep, at);
    out.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

bool has_item(std::string_view list, std::string_view item) {
  for (std::string_view i : split(list, ','))
    if (i == item) return true;
  return false;
}

std::optional<std::int64_t> number(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == s.c_str() || (*end != '\0' && *end != '\n' && *end != ' ')) return {};
  return v;
}

// Where the hierarchy that holds the cpu controller is mounted (mountpoint, and the cgroup its
// root is: a container's view mounts its own cgroup as "/"), from /proc/self/mountinfo.
struct Mount {
  std::string point, root;
};

std::optional<Mount> cpu_mount(std::string_view mountinfo, bool v2) {
  for (std::string_view line : split(mountinfo, '\n')) {
    size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    std::vector<std::string_view> left = split(line.substr(0, dash), ' ');
    std::vector<std::string_view> right = split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    if (v2 ? right[0] == "cgroup2" : right[0] == "cgroup" && has_item(right[2], "cpu"))
      return Mount{std::string(left[4]), std::string(left[3])};
  }
  return std::nullopt;
}

// The quota a folder's files set, in cores; nullopt where none ("max", -1) or unreadable.
std::optional<double> folder_quota(const std::string& dir, bool v2) {
  if (v2) {
    std::string text = read_proc_file(dir + "/cpu.max", 128);  // the views below point into it
    std::vector<std::string_view> f = split(text, ' ');
    if (f.size() < 2 || f[0] == "max") return std::nullopt;
    auto quota = number(f[0]), period = number(f[1]);
    if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
    return double(*quota) / double(*period);
  }
  auto quota = number(read_proc_file(dir + "/cpu.cfs_quota_us", 64));
  auto period = number(read_proc_file(dir + "/cpu.cfs_period_us", 64));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return double(*quota) / double(*period);
}

}  // namespace

std::optional<CpuQuota> read_cpu_quota(const std::string& self_cgroup, const std::string& mountinfo,
                                       const std::string& prefix) {
  // "0::/path" for cgroup v2; "4:cpu,cpuacct:/path" for the v1 hierarchy of the cpu controller.
  // A hybrid host has both: the v1 cpu controller, where mounted, is the one that applies.
  std::optional<std::string> v1_path, v2_path;
  for (std::string_view line : split(self_cgroup, '\n')) {
    std::vector<std::string_view> f = split(line, ':');
    if (f.size() < 3) continue;
    std::string path(line.substr(f[0].size() + f[1].size() + 2));
    if (f[0] == "0" && f[1].empty())
      v2_path = path;
    else if (has_item(f[1], "cpu"))
      v1_path = path;
  }
  bool v2 = !v1_path;
  std::optional<std::string> path = v2 ? v2_path : v1_path;
  auto mount = path ? cpu_mount(mountinfo, v2) : std::nullopt;
  if (!mount) return std::nullopt;
  // The process's path as the mount shows it: below the mount's root.
  std::string rel = *path;
  if (mount->root != "/" && rel.starts_with(mount->root) &&
      (rel.size() == mount->root.size() || rel[mount->root.size()] == '/'))
    rel = rel.substr(mount->root.size());
  if (rel.empty() || rel == "/") rel.clear();
  std::optional<CpuQuota> found;
  for (std::string walk = rel;;) {
    std::string dir = prefix + mount->point + walk;
    if (auto cores = folder_quota(dir, v2); cores && (!found || *cores < found->cores)) {
      found = CpuQuota{*cores, mount->point + walk, v2};
    }
    if (walk.empty()) break;
    size_t slash = walk.rfind('/');
    walk = slash == std::string::npos ? "" : walk.substr(0, slash);
  }
  return found;
}

std::optional<CpuThrottling> read_cpu_throttling(const CpuQuota& quota, const std::string& prefix) {
  std::string text = read_proc_file(prefix + quota.dir + "/cpu.stat", 4096);
  if (text.empty()) return std::nullopt;
  CpuThrottling t;
  bool any = false;
  for (std::string_view line : split(text, '\n')) {
    size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    std::string_view key = line.substr(0, space);
    auto v = number(line.substr(space + 1));
    if (!v) continue;
    if (key == "nr_periods") {
      t.periods = *v, any = true;
    } else if (key == "nr_throttled") {
      t.throttled = *v, any = true;
    } else if (key == "throttled_usec") {  // v2
      t.throttled_ns = *v * 1000, any = true;
    } else if (key == "throttled_time") {  // v1, in ns
      t.throttled_ns = *v, any = true;
    }
  }
  if (!any) return std::nullopt;
  return t;
}

std::optional<CpuQuota> own_cpu_quota() {
  return read_cpu_quota(read_proc_file("/proc/self/cgroup", 4096),
                        read_proc_file("/proc/self/mountinfo"));
}

}  // namespace sonde
