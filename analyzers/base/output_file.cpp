#include "base/output_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"

namespace sonde::analyzers {

OutputKind output_kind(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return OutputKind::kNone;
  if (S_ISREG(st.st_mode)) return OutputKind::kRegular;
  if (S_ISDIR(st.st_mode)) return OutputKind::kDirectory;
  return OutputKind::kOther;
}

std::string output_kind_name(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "nothing";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  return "a regular file";
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

void refuse_input_as_output(const std::vector<std::string>& inputs, const std::string& output) {
  for (const std::string& input : inputs)
    if (same_file(input, output))
      throw Error(fmt::format("{} is both an input and the output", input), 2);
}

std::string temp_beside(const std::string& path) {
  std::string suffix = fmt::format(".sonde-tmp-{}", ::getpid());
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  constexpr std::size_t kNameMax = 255;  // NAME_MAX of Linux's file systems
  if (base.size() + suffix.size() > kNameMax) base.resize(kNameMax - suffix.size());
  return dir + base + suffix;
}

void refuse_repeated_inputs(const std::vector<std::string>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(inputs[i], inputs[j]))
        throw Error(fmt::format("{} is given twice (as {})", inputs[i], inputs[j]), 2);
}

void require_regular_output(const std::string& path, const std::string& shown) {
  OutputKind kind = output_kind(path);
  if (kind == OutputKind::kDirectory)
    throw Error(
        fmt::format("{} is a directory: name the profile's file (say, {}/prof.db)", shown, shown));
  if (kind == OutputKind::kOther)
    throw Error(
        fmt::format("{} is {}, not a regular file: a profile is a SQLite file of its own, "
                    "and sonde never replaces what is there; give another path",
                    shown, output_kind_name(path)));
}

}  // namespace sonde::analyzers
