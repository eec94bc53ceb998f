// The numbers a program prints, read as a person reads them: a table's columns by their header,
// a number by the unit after it and the name before it. No regular expressions: a line of a
// megabyte (a progress bar without newlines) must not exhaust std::regex's recursion.
#include "programs/tune_output.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace sonde::analyzers {
namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }
// Letters, '_' and any byte of a UTF-8 sequence (µs, ß): parts of a word.
bool letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool alnum(char c) { return digit(c) || letter(c); }
bool space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool one_of(std::string_view word, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), word) != set.end();
}

// Whether a part of `name` is one of `words` (any case): parts split at '_', non-letters (digits
// too, unless `digits` keeps them in: `top1`, `f1`) and camelCase (`elapsedTime`).
bool has_part(std::string_view name, std::initializer_list<std::string_view> words, bool digits) {
  auto in_part = [&](char c) { return digits ? alnum(c) : letter(c); };
  std::string part;
  auto says_it = [&] {
    bool yes = one_of(lower(part), words);
    part.clear();
    return yes;
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool camel = i > 0 && c >= 'A' && c <= 'Z' && name[i - 1] >= 'a' && name[i - 1] <= 'z';
    if (!in_part(c) || c == '_' || camel) {
      if (says_it()) return true;
      if (!in_part(c) || c == '_') continue;
    }
    part += c;
  }
  return says_it();
}

// A name whose number differs from run to run by nature: a timing, a rate, a clock, an id.
// Judged on the name's parts: `elapsed_time`, `elapsedTime` and `main/elapsed-time` all hold
// `time`; `timestep` does not.
bool varying_name(std::string_view name) {
  return has_part(name, {"time",       "times",   "elapsed", "took",      "duration", "speed",
                         "throughput", "eta",     "latency", "timestamp", "date",     "clock",
                         "walltime",   "runtime", "pid",     "ppid",      "tid",      "port",
                         "mem",        "memory",  "rss",     "fps"},
                  false);
}

// Units that make the number before them a timing, a rate or a memory size (which the
// allocator and the machine's load move): `2.1s`, `310 usec`, `5.23it/s`, `s/it`, `12 GB/s`,
// `340 MiB`. A count (`64 samples`, `3 steps`) stays a result.
bool time_unit(const std::string& w) {
  return one_of(w, {"ns",      "nsec", "us",   "usec",   "\xc2\xb5s", "\xce\xbcs", "ms",   "msec",
                    "s",       "sec",  "secs", "second", "seconds",   "min",       "mins", "minute",
                    "minutes", "h",    "hr",   "hrs",    "hour",      "hours"});
}
bool size_or_rate_unit(const std::string& w) {
  return one_of(w, {"kb", "kib", "mb", "mib", "gb", "gib", "tb", "tib", "fps", "flops", "mflops",
                    "gflops", "tflops", "pflops"});
}

enum class Kind { kNumber, kWord, kSpace, kMark, kLeftOut };

struct Token {
  Kind kind;
  std::string_view text;
  double value = 0;
};

// A date (2026-12-02, 2026/12/02) or a clock time or duration (14:01:58, 0:01:23.45, 00:01)
// starting at i, with what follows it of the same stamp (T14:01:58.123Z); its length or 0.
std::size_t digits_at(std::string_view s, std::size_t i, std::size_t lo, std::size_t hi) {
  std::size_t n = 0;
  while (i + n < s.size() && digit(s[i + n]) && n <= hi) ++n;
  return n >= lo && n <= hi ? n : 0;
}

std::size_t clock_at(std::string_view s, std::size_t i) {
  std::size_t h = digits_at(s, i, 1, 2);
  if (!h || i + h >= s.size() || s[i + h] != ':') return 0;
  std::size_t end = i + h + 1, m = digits_at(s, end, 2, 2);
  if (!m) return 0;
  end += m;
  if (end < s.size() && s[end] == ':' && digits_at(s, end + 1, 2, 2)) end += 3;
  if (end + 1 < s.size() && (s[end] == '.' || s[end] == ',') && digit(s[end + 1]))
    for (++end; end < s.size() && digit(s[end]);) ++end;
  if (end < s.size() && s[end] == 'Z') ++end;
  return end < s.size() && alnum(s[end]) ? 0 : end - i;
}

std::size_t date_at(std::string_view s, std::size_t i) {
  if (!digits_at(s, i, 4, 4) || i + 4 >= s.size()) return 0;
  char sep = s[i + 4];
  if (sep != '-' && sep != '/') return 0;
  std::size_t end = i + 5, m = digits_at(s, end, 1, 2);
  if (!m || end + m >= s.size() || s[end + m] != sep) return 0;
  end += m + 1;
  std::size_t d = digits_at(s, end, 1, 2);
  if (!d) return 0;
  end += d;
  if (end + 1 < s.size() && (s[end] == 'T' || s[end] == ' '))
    end += clock_at(s, end + 1) ? 1 + clock_at(s, end + 1) : 0;
  return end < s.size() && alnum(s[end]) ? 0 : end - i;
}

// A number starting at i (after an optional sign the caller has checked): its length, or 0.
std::size_t number_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
  std::size_t digits = 0;
  while (j < s.size() && digit(s[j])) ++j, ++digits;
  if (j < s.size() && s[j] == '.') {
    std::size_t k = j + 1;
    while (k < s.size() && digit(s[k])) ++k, ++digits;
    if (digits == 0) return 0;
    j = k;
  }
  if (digits == 0) return 0;
  if (j + 1 < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    std::size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && digit(s[k])) {
      while (k < s.size() && digit(s[k])) ++k;
      j = k;
    }
  }
  return j - i;
}

bool sign_starts_number(std::string_view s, std::size_t i) {
  if (s[i] != '-' && s[i] != '+') return false;
  bool after_value =
      i > 0 && (alnum(s[i - 1]) || s[i - 1] == ')' || s[i - 1] == ']' || s[i - 1] == '.');
  return !after_value && number_at(s, i) > 1;
}

std::vector<Token> tokens_of(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    bool starts = i == 0 || !(alnum(s[i - 1]) || s[i - 1] == '.');
    if (space(c)) {
      std::size_t j = i;
      while (j < s.size() && space(s[j])) ++j;
      out.push_back({Kind::kSpace, s.substr(i, j - i)});
      i = j;
    } else if (std::size_t n = starts && digit(c) ? std::max(date_at(s, i), clock_at(s, i)) : 0) {
      out.push_back({Kind::kLeftOut, s.substr(i, n)});
      i += n;
    } else if (starts && c == '0' && i + 2 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      std::size_t j = i + 2;  // an address: where the allocator put an object this time
      while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back({Kind::kLeftOut, s.substr(i, j - i)});
      i = j;
    } else if (std::size_t n = starts && (digit(c) || c == '.' || sign_starts_number(s, i))
                                   ? number_at(s, i)
                                   : 0) {
      if (i + n + 1 < s.size() && s[i + n] == '.' && digit(s[i + n + 1])) {
        std::size_t j = i + n;  // 1.2.3: a version, words
        while (j < s.size() && (digit(s[j]) || s[j] == '.')) ++j;
        out.push_back({Kind::kWord, s.substr(i, j - i)});
        i = j;
        continue;
      }
      std::string text(s.substr(i, n));
      out.push_back({Kind::kNumber, s.substr(i, n), std::strtod(text.c_str(), nullptr)});
      i += n;
      std::size_t j = i;  // a unit or suffix glued to it (2.1s, 3rd): its letters, a word
      while (j < s.size() && letter(s[j])) ++j;
      if (j > i) out.push_back({Kind::kWord, s.substr(i, j - i)});
      i = j;
    } else if (letter(c)) {
      std::size_t j = i;
      while (j < s.size() && alnum(s[j])) ++j;
      std::string w = lower(s.substr(i, j - i));
      if (one_of(w, {"nan", "inf", "infinity"}))
        out.push_back({Kind::kNumber, s.substr(i, j - i), w == "nan" ? NAN : HUGE_VAL});
      else
        out.push_back({Kind::kWord, s.substr(i, j - i)});
      i = j;
    } else {
      out.push_back({Kind::kMark, s.substr(i, 1)});
      ++i;
    }
  }
  return out;
}

// The unit after token i (a number): `s`, `it/s`, `s/it`, `MiB`, glued or after one space.
bool unit_follows(const std::vector<Token>& t, std::size_t i) {
  std::size_t j = i + 1;
  if (j < t.size() && t[j].kind == Kind::kSpace) ++j;
  if (j >= t.size() || t[j].kind != Kind::kWord) return false;
  std::string first = lower(t[j].text);
  if (time_unit(first) || size_or_rate_unit(first)) return true;
  return j + 2 < t.size() && t[j + 1].text == "/" && t[j + 2].kind == Kind::kWord &&
         time_unit(lower(t[j + 2].text));
}

// The name before token i (a number): `time 2.1`, `elapsed_time: 6.45`, `"pid": 4242`.
// A name whose number is the program's result: a loss, an accuracy, an error, a score. Judged
// on the name's parts as varying_name judges, digits kept in them (`val_loss`, `top1Acc`).
bool result_name(std::string_view name) {
  return has_part(name, {"loss",       "nll",    "acc",   "accuracy", "err",  "error", "errors",
                         "perplexity", "ppl",    "score", "f1",       "auc",  "bleu",  "rouge",
                         "reward",     "mse",    "mae",   "rmse",     "top1", "top5",  "metric",
                         "precision",  "recall", "iou",   "dice",     "psnr", "ssim"},
                  true);
}

// The word naming the number at token i (before it, past ':', '=' and quotes), or "".
std::string_view name_before(const std::vector<Token>& t, std::size_t i) {
  std::size_t j = i;
  for (int marks = 0; j > 0; --j) {
    const Token& p = t[j - 1];
    if (p.kind == Kind::kSpace) continue;
    if (p.kind == Kind::kMark && one_of(p.text, {":", "=", "\"", "'"}) && ++marks <= 3) continue;
    break;
  }
  return j > 0 && t[j - 1].kind == Kind::kWord ? std::string_view(t[j - 1].text)
                                               : std::string_view();
}

bool varying_name_precedes(const std::vector<Token>& t, std::size_t i) {
  return varying_name(name_before(t, i));
}

std::vector<std::string_view> fields_of(std::string_view s) {
  std::vector<std::string_view> out;
  for (std::size_t i = 0; i < s.size();) {
    while (i < s.size() && space(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !space(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// A field that is one number and nothing else (nan and inf included).
bool whole_number(std::string_view f) {
  std::string w = lower(f);
  return number_at(f, 0) == f.size() || one_of(w, {"nan", "inf", "-inf", "infinity"});
}

bool starts_like_number(std::string_view f) {
  return digit(f[0]) || (f.size() > 1 && (f[0] == '-' || f[0] == '+' || f[0] == '.') &&
                         (digit(f[1]) || f[1] == '.'));
}

// A table: a line of two or more names (Chainer's PrintReport, a pandas frame, a hand-made
// header), then rows of as many numbers (or one more: an index). Which of its columns are
// timings is read from the header: PrintReport's `elapsed_time` holds seconds with no unit.
struct TableHeader {
  std::vector<bool> varying;  // per column
  std::vector<bool> results;  // per column: a result's name
  bool any = false;
};

TableHeader header_of(const std::vector<std::string_view>& fields) {
  TableHeader h;
  if (fields.size() < 2) return h;
  for (std::string_view f : fields) {
    if (starts_like_number(f)) return {};
    h.varying.push_back(varying_name(f));
    h.results.push_back(result_name(f));
    h.any = h.any || h.varying.back();
  }
  return h;
}

// Control sequences (a progress bar's `ESC[J`) are no text.
std::string without_escapes(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7e)) ++j;
      i = j;
      continue;
    }
    out += s[i];
  }
  return out;
}

PrintedLine read_line(const std::string& line, const TableHeader& header) {
  PrintedLine p;
  p.text = line;
  std::vector<Token> t = tokens_of(line);
  std::vector<std::string_view> fields = fields_of(line);
  // A row of the table: every field one number.
  std::size_t numbers = 0;
  for (const Token& x : t) numbers += x.kind == Kind::kNumber;
  bool row = header.any && numbers == fields.size() &&
             std::all_of(fields.begin(), fields.end(), whole_number) &&
             (fields.size() == header.varying.size() || fields.size() == header.varying.size() + 1);
  std::size_t offset = row ? fields.size() - header.varying.size() : 0;
  std::size_t column = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    Token& x = t[i];
    if (x.kind == Kind::kNumber) {
      bool timed = (row && column >= offset && header.varying[column - offset]) ||
                   unit_follows(t, i) || varying_name_precedes(t, i);
      bool result = (row && column >= offset && header.results[column - offset]) ||
                    result_name(name_before(t, i));
      ++column;
      if (timed) x.kind = Kind::kLeftOut;
      if (!timed) p.results.push_back(result);
    }
    switch (x.kind) {
      case Kind::kNumber:
        p.words += '#';
        p.numbers.push_back(x.value);
        break;
      case Kind::kLeftOut:
        p.words += '~';
        ++p.left_out;
        break;
      case Kind::kSpace:
        p.words += ' ';
        break;
      default:
        p.words += x.text;
    }
  }
  while (!p.words.empty() && p.words.back() == ' ') p.words.pop_back();
  if (!p.words.empty() && p.words.front() == ' ') p.words.erase(0, 1);
  return p;
}

double relative_difference(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (!std::isfinite(a) || !std::isfinite(b)) return HUGE_VAL;
  return std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b));
}

bool beyond(double a, double b, const OutputTolerance& tol) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return false;
  if (!std::isfinite(a) || !std::isfinite(b)) return true;
  return std::fabs(a - b) > std::max(tol.rel * std::max(std::fabs(a), std::fabs(b)), tol.abs);
}

std::string quoted(const std::string& line) {
  std::string s = line;
  while (!s.empty() && space(s.back())) s.pop_back();
  return "'" + (s.size() > 80 ? s.substr(0, 77) + "..." : s) + "'";
}

}  // namespace

std::string tolerance_text(double v) {
  double e = v > 0 ? std::round(std::log10(v)) : 0;
  if (v > 0 && std::fabs(v - std::pow(10.0, e)) <= 1e-9 * v)
    return fmt::format("1e{}", static_cast<int>(e));
  return fmt::format("{:g}", v);
}

std::vector<PrintedLine> printed_lines(const std::string& output) {
  std::vector<PrintedLine> out;
  TableHeader header;
  std::size_t start = 0;
  while (start <= output.size()) {
    std::size_t end = output.find_first_of("\r\n", start);
    if (end == std::string::npos) end = output.size();
    std::string line = without_escapes(std::string_view(output).substr(start, end - start));
    start = end + 1;
    std::vector<std::string_view> fields = fields_of(line);
    if (fields.empty()) continue;  // blank, or a progress bar's carriage return
    if (TableHeader h = header_of(fields); !h.varying.empty()) header = h;
    out.push_back(read_line(line, header));
  }
  return out;
}

VaryingPlaces varying_places(const std::vector<std::string>& outputs, const OutputTolerance& tol) {
  VaryingPlaces out;
  if (outputs.empty()) return out;
  std::vector<PrintedLine> first = printed_lines(outputs[0]);
  std::vector<std::vector<PrintedLine>> others;
  for (std::size_t k = 1; k < outputs.size(); ++k) others.push_back(printed_lines(outputs[k]));
  for (const std::vector<PrintedLine>& other : others) {
    if (other.size() != first.size()) continue;
    for (std::size_t i = 0; i < first.size(); ++i) {
      if (first[i].words != other[i].words) continue;
      for (std::size_t j = 0; j < first[i].numbers.size(); ++j) {
        if (!beyond(first[i].numbers[j], other[i].numbers[j], tol)) continue;
        if (j < first[i].results.size() && first[i].results[j])
          out.bands[{i, j}] = {first[i].numbers[j], first[i].numbers[j]};
        else
          out.left_out.insert({i, j});
      }
    }
  }
  // A result's band: every run's number at its place, its lines alike.
  for (auto& [place, band] : out.bands)
    for (const std::vector<PrintedLine>& other : others) {
      auto [i, j] = place;
      if (other.size() != first.size() || first[i].words != other[i].words) continue;
      band.first = std::min(band.first, other[i].numbers[j]);
      band.second = std::max(band.second, other[i].numbers[j]);
    }
  return out;
}

OutputComparison compare_outputs(const std::string& before, const std::string& after,
                                 const OutputTolerance& tol, const VaryingPlaces& varying) {
  std::vector<PrintedLine> a = printed_lines(before), b = printed_lines(after);
  OutputComparison c;
  c.tolerance = tol;
  c.lines_before = a.size();
  c.lines_after = b.size();
  for (const PrintedLine& l : b) {
    c.compared += l.numbers.size();
    c.left_out += l.left_out;
  }
  std::string first_within;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    bool differs = a[i].words != b[i].words, moved = false;
    if (!differs) {
      for (std::size_t j = 0; j < a[i].numbers.size(); ++j) {
        if (varying.left_out.count({i, j})) {
          --c.compared;
          ++c.left_out;
          continue;
        }
        double x = a[i].numbers[j], y = b[i].numbers[j];
        if (auto band = varying.bands.find({i, j}); band != varying.bands.end()) {
          // Held to the band its runs span: inside it is no difference, beyond it by more
          // than the tolerance is (a loss that FTZ moved out of its run-to-run noise).
          x = std::clamp(y, band->second.first, band->second.second);
        }
        double rel = relative_difference(x, y);
        c.largest_rel = std::max(c.largest_rel, rel);
        moved = moved || rel > 0;
        if (beyond(x, y, tol)) {
          ++c.beyond;
          differs = true;
        }
      }
    } else {
      ++c.word_lines;
    }
    std::string pair = quoted(a[i].text) + " -> " + quoted(b[i].text);
    if (differs && c.first.empty()) c.first = pair;
    if (moved && first_within.empty()) first_within = pair;
  }
  if (c.first.empty() && c.lines_before != c.lines_after)
    c.first = fmt::format("{} printed lines against {}", c.lines_after, c.lines_before);
  if (c.first.empty()) c.first = first_within;
  return c;
}

std::string output_summary(const OutputComparison& c) {
  const OutputTolerance& tol = c.tolerance;
  std::string within =
      fmt::format("rel {}, abs {}", tolerance_text(tol.rel), tolerance_text(tol.abs));
  if (c.differs()) {
    std::vector<std::string> why;
    if (c.beyond > 0)
      why.push_back(fmt::format("{} of {} numbers beyond {}", c.beyond, c.compared, within));
    if (c.word_lines > 0)
      why.push_back(
          fmt::format("the words of {} line{}", c.word_lines, c.word_lines == 1 ? "" : "s"));
    if (c.lines_before != c.lines_after)
      why.push_back(fmt::format("{} lines against {}", c.lines_after, c.lines_before));
    return fmt::format("differs ({})", fmt::join(why, "; "));
  }
  // No number to hold the runs to: "same" told a red team that FTZ left its result alone,
  // which its logging (stderr) printed as 5e-37, then 0.
  if (c.compared == 0)
    return c.left_out > 0 ? fmt::format(
                                "nothing compared (no result on stdout, {} timings/ids left "
                                "out; stderr, where logging writes, is not compared)",
                                c.left_out)
                          : std::string(
                                "nothing compared (no number on stdout; stderr, where logging "
                                "writes, is not compared)");
  std::string counted = fmt::format("{} number{} compared", c.compared, c.compared == 1 ? "" : "s");
  if (c.left_out > 0) counted += fmt::format(", {} timings/ids left out", c.left_out);
  return c.exact() ? fmt::format("same ({})", counted)
                   : fmt::format("same within {} ({})", within, counted);
}

std::string output_detail(const OutputComparison& c) {
  std::string out = output_summary(c);
  if (c.largest_rel > 0)
    out += std::isfinite(c.largest_rel)
               ? fmt::format(", largest relative difference {:.2g}", c.largest_rel)
               : std::string(", a NaN or infinity against a number");
  if (!c.first.empty()) out += ": " + c.first;
  return out;
}

}  // namespace sonde::analyzers
