#include "render/colour.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace sonde::analyzers {

namespace {

constexpr std::string_view kBold = "\x1b[1m", kDim = "\x1b[2m", kYellow = "\x1b[33m",
                           kCyan = "\x1b[36m", kGreen = "\x1b[32m", kReset = "\x1b[0m";

std::string paint(std::string_view text, std::string_view style) {
  return std::string(style) + std::string(text) + std::string(kReset);
}

// Calls `line(text)` for each line (without its newline) and joins what it returns.
template <class F>
std::string each_line(std::string_view text, F line) {
  std::string out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    out += line(l);
    if (nl == std::string_view::npos) break;
    out += '\n';
    text.remove_prefix(nl + 1);
  }
  return out;
}

// "label:   value" with the label (and its colon) painted.
std::string label_line(std::string_view l, std::string_view style) {
  auto colon = l.find(':');
  return paint(l.substr(0, colon + 1), style) + std::string(l.substr(colon + 1));
}

}  // namespace

bool colour_wanted(std::FILE* out) {
  if (out == nullptr || ::isatty(::fileno(out)) != 1) return false;
  if (const char* no = std::getenv("NO_COLOR"); no != nullptr && *no != '\0') return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

std::string colour_report(std::string_view text) {
  return each_line(text, [](std::string_view l) -> std::string {
    for (std::string_view label : {"command:", "host:", "processes:", "BLAS:", "total:",
                                   "%Time of:"})
      if (l.starts_with(label)) return label_line(l, kBold);
    if (l.starts_with("warning:")) return paint(l, kYellow);
    if (l.starts_with("%Time")) return paint(l, kBold);
    return std::string(l);
  });
}

std::string colour_candidates(std::string_view text) {
  return each_line(text, [](std::string_view l) -> std::string {
    // "N. [rule] location  (est. gain S s)"
    auto open = l.find(". [");
    auto close = l.find("] ");
    auto gain = l.rfind("  (est. gain ");
    if (!l.empty() && l[0] >= '0' && l[0] <= '9' && open != std::string_view::npos &&
        close != std::string_view::npos && gain != std::string_view::npos && close < gain) {
      return paint(l.substr(0, open + 2), kBold) + paint(l.substr(open + 2, close - open - 1), kCyan) +
             paint(l.substr(close + 1, gain - close - 1), kBold) + paint(l.substr(gain), kGreen);
    }
    for (std::string_view label : {"   evidence:", "   gain bound:", "   advice:", "   measured:"})
      if (l.starts_with(label)) return label_line(l, kDim);
    return std::string(l);
  });
}

}  // namespace sonde::analyzers
