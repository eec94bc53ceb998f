#include "store/peaks.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

namespace sonde {
namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

// Empty when the line is good, else why not.
std::string parse_line(std::string_view line, Peak& p) {
  std::vector<std::string_view> f = split_fields(line);
  if (f.size() < 3) return "expected `resource threads value [source [spread]]`";
  if (f.size() > 5) return "more than five fields";
  std::optional<int> threads = parse_peak_threads(f[1]);
  if (!threads) return "threads must be a whole number >= 0";
  std::string why;
  std::optional<double> value = parse_peak_value(f[2], &why);
  if (!value) return "value " + why;
  p.resource = std::string(f[0]);
  p.threads = *threads;
  p.value = *value;
  p.source = f.size() >= 4 ? std::string(f[3]) : "manual";
  p.spread_pct.reset();
  if (f.size() == 5) {
    double spread = 0;
    auto [send, sec] = std::from_chars(f[4].data(), f[4].data() + f[4].size(), spread);
    if (sec != std::errc() || send != f[4].data() + f[4].size() || !std::isfinite(spread) ||
        spread < 0)
      return "spread must be a finite number >= 0 (%)";
    p.spread_pct = spread;
  }
  return {};
}

}  // namespace

std::optional<int> parse_peak_threads(std::string_view field) {
  int v = 0;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<double> parse_peak_value(std::string_view field, std::string* why) {
  double v = 0;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size()) {
    if (why) *why = "is not a number";
    return std::nullopt;
  }
  if (!std::isfinite(v) || v <= 0) {
    if (why) *why = "must be finite and > 0";
    return std::nullopt;
  }
  return v;
}

PeaksText parse_peaks(std::string_view text) {
  PeaksText out;
  int number = 0;
  while (!text.empty()) {
    ++number;
    std::size_t eol = text.find('\n');
    std::string_view raw = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    std::string_view line = raw;
    if (std::size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Peak p;
    if (std::string why = parse_line(line, p); !why.empty()) {
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      out.bad_lines.push_back(std::to_string(number) + ": " + why + ": " + std::string(raw));
      continue;
    }
    out.peaks.push_back(std::move(p));
  }
  return out;
}

bool read_peaks_file(const std::string& path, PeaksText& out, std::string& error) {
  out = {};
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever (before main, when
  // libsonde reads it).
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int why = errno;
    if (why == ENOENT || why == ENOTDIR) return true;  // nothing there
    error = path + ": " + std::strerror(why);
    errno = why;  // the caller may tell an unreadable file (EACCES) from the rest
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = path + ": not a regular file; peaks not read";
    return false;
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxPeaksFileBytes) {
    ::close(fd);
    error = path + ": " + std::to_string(st.st_size) + " bytes, over the " +
            std::to_string(kMaxPeaksFileBytes) + " a peaks file may have; peaks not read";
    return false;
  }
  // Read at most one byte past the cap: a file growing meanwhile is refused, not followed.
  std::string text(kMaxPeaksFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got > kMaxPeaksFileBytes) {
    error = path + ": grew past the " + std::to_string(kMaxPeaksFileBytes) +
            " bytes a peaks file may have; peaks not read";
    return false;
  }
  text.resize(got);
  out = parse_peaks(text);
  return true;
}

}  // namespace sonde
