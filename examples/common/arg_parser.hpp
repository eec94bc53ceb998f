// The command-line conventions the C++ examples share: "--name value" and "--name=value",
// numbers checked against a range, --help printing the usage, and every mistake reported on one
// line with exit status 2, so callers (and tests) see a plain usage error, not an exception.
#pragma once

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace examples {

class ArgParser {
 public:
  ArgParser(const char* program, const char* usage, int argc, char** argv)
      : program_(program), usage_(usage), argc_(argc), argv_(argv) {}

  // Moves to the next option; false when none is left.
  bool next() {
    if (++i_ >= argc_) return false;
    name_ = argv_[i_];
    inline_value_ = false;
    if (name_ == "--help" || name_ == "-h") {
      std::fputs(usage_, stdout);
      std::exit(0);
    }
    if (const auto eq = name_.find('='); name_.starts_with("--") && eq != std::string_view::npos) {
      value_ = name_.substr(eq + 1);
      name_ = name_.substr(0, eq);
      inline_value_ = true;
    }
    return true;
  }

  std::string_view name() const { return name_; }

  std::string_view text() {
    if (inline_value_) return value_;
    if (i_ + 1 >= argc_) fail("missing value for option", name_);
    return argv_[++i_];
  }

  std::string nonempty_text() {
    std::string_view v = text();
    if (v.empty()) fail("empty value for option", name_);
    return std::string(v);
  }

  // The whole value as a number in [lo, hi]; anything else is a usage error.
  template <typename Num>
  Num number(Num lo, Num hi) {
    std::string_view t = text();
    Num value{};
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (ec != std::errc{} || end != t.data() + t.size() || !(value >= lo && value <= hi)) {
      std::fprintf(stderr, "%s: %.*s expects a number in [%s, %s], got '%.*s'\n", program_,
                   static_cast<int>(name_.size()), name_.data(), std::to_string(lo).c_str(),
                   std::to_string(hi).c_str(), static_cast<int>(t.size()), t.data());
      std::exit(2);
    }
    return value;
  }

  [[noreturn]] void unknown() { fail("unknown option", argv_[i_]); }

 private:
  [[noreturn]] void fail(const char* what, std::string_view arg) {
    std::fprintf(stderr, "%s: %s: '%.*s' (see --help)\n", program_, what,
                 static_cast<int>(arg.size()), arg.data());
    std::exit(2);
  }

  const char* program_;
  const char* usage_;
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string_view name_, value_;
  bool inline_value_ = false;
};

}  // namespace examples
