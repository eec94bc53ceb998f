#include "render/colour.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace sonde::analyzers {

namespace {

constexpr std::string_view kBold = "\x1b[1m", kDim = "\x1b[2m", kYellow = "\x1b[33m",
                           kCyan = "\x1b[36m", kGreen = "\x1b[32m", kReset = "\x1b[0m";

std::string paint(std::string_view text, std::string_view style) {
  return std::string(style) + std::string(text) + std::string(kReset);
}

// Calls `line(text)` for each line (without its newline) and joins what it returns; a `line`
// that takes three views gets the lines before and after too ("" at either end).
template <class F>
std::string each_line(std::string_view text, F line) {
  std::string out;
  std::string_view previous;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    std::string_view rest = nl == std::string_view::npos ? "" : text.substr(nl + 1);
    if constexpr (std::is_invocable_v<F, std::string_view, std::string_view, std::string_view>)
      out += line(l, previous, rest.substr(0, rest.find('\n')));
    else
      out += line(l);
    if (nl == std::string_view::npos) break;
    out += '\n';
    text = rest;
    previous = l;
  }
  return out;
}

// "label:   value" with the label (and its colon) painted.
std::string label_line(std::string_view l, std::string_view style) {
  auto colon = l.find(':');
  return paint(l.substr(0, colon + 1), style) + std::string(l.substr(colon + 1));
}

}  // namespace

namespace {
ColourMode g_mode = ColourMode::kAuto;
}  // namespace

void set_colour_mode(ColourMode mode) { g_mode = mode; }

ColourMode colour_mode_named(std::string_view name) {
  if (name == "always") return ColourMode::kAlways;
  if (name == "never") return ColourMode::kNever;
  return ColourMode::kAuto;
}

bool colour_wanted(std::FILE* out) {
  // Asked for on the command line: that wins over the environment (no-color.org).
  if (g_mode != ColourMode::kAuto) return g_mode == ColourMode::kAlways && out != nullptr;
  if (out == nullptr) return false;
  if (const char* no = std::getenv("NO_COLOR"); no != nullptr && *no != '\0') return false;
  if (::isatty(::fileno(out)) != 1) {
    const char* force = std::getenv("CLICOLOR_FORCE");
    return force != nullptr && *force != '\0' && std::strcmp(force, "0") != 0;
  }
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

std::string colour_report(std::string_view text) {
  return each_line(text, [](std::string_view l) -> std::string {
    for (std::string_view label :
         {"command:", "host:", "processes:", "BLAS:", "total:", "%Time of:"})
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
      return paint(l.substr(0, open + 2), kBold) +
             paint(l.substr(open + 2, close - open - 1), kCyan) +
             paint(l.substr(close + 1, gain - close - 1), kBold) + paint(l.substr(gain), kGreen);
    }
    for (std::string_view label : {"   evidence:", "   gain bound:", "   advice:", "   measured:"})
      if (l.starts_with(label)) return label_line(l, kDim);
    return std::string(l);
  });
}

std::string colour_tree(std::string_view text) {
  return each_line(text, [](std::string_view l) -> std::string {
    if (l.starts_with("process ") || l.starts_with("all threads") || l.starts_with("  incl %") ||
        l.starts_with("callers of ") || l.starts_with("callees of "))
      return paint(l, kBold);
    if (l.starts_with("warning:")) return paint(l, kYellow);
    return std::string(l);
  });
}

std::string colour_metrics(std::string_view text) {
  // A section: its title (the first line, or one after a blank line), a table's heading (the
  // line above its dashes); warnings anywhere.
  return each_line(
      text,
      [](std::string_view l, std::string_view previous, std::string_view next) -> std::string {
        if (l.starts_with("warning:")) return paint(l, kYellow);
        if ((!l.empty() && previous.empty()) || next.starts_with("---")) return paint(l, kBold);
        return std::string(l);
      });
}

}  // namespace sonde::analyzers
