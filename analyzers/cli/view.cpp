// sonde view: the profile in the browser, served on 127.0.0.1 with a token (by
// sonde-view-server, which this execs: cli/view_serve.hpp), or written as one self-contained
// HTML file (--html).
#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>

#include "base/executable_dir.hpp"
#include "base/output_file.hpp"
#include "cli/command.hpp"
#include "cli/view_serve.hpp"
#include "view/html_page.hpp"
#include "view/view_bundle.hpp"
#include "view/viewer_assets.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {

struct Options {
  std::vector<std::string> files;
  int port = 0;
  bool open = false;
  std::optional<std::string> html;
  bool force = false;
};

// Below this, reading is quick enough that a progress line would only flicker.
constexpr off_t kProgressBytes = 32 << 20;

// The whole bundle for --html, every part made (a file that cannot be read is a usage error)
// before the page is written.
std::shared_ptr<ViewData> made_bundle(const std::vector<std::string>& files) {
  off_t total = 0;
  for (const std::string& f : files)
    if (struct stat st{}; ::stat(f.c_str(), &st) == 0) total += st.st_size;
  bool progress = total >= kProgressBytes && ::isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<ViewData> data = open_view_profiles(files);
  if (progress)
    fmt::print(stderr, "sonde view: reading {} ({:.0f} MB)...",
               files.size() == 1 ? files[0] : fmt::format("{} profiles", files.size()),
               total / 1e6);
  try {
    data->whole([](std::string_view) {});
  } catch (const Error& e) {
    if (progress) fmt::print(stderr, "\n");
    throw Error(e.what(), kUsageError);
  }
  if (progress)
    fmt::print(stderr, " {:.1f} s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return data;
}

// The page, its data streamed from the parts' texts into it: the bundle is never joined into
// one string, nor escaped into a second.
void write_page(std::ostream& file, const StandalonePage& page, ViewData& data) {
  file.write(page.before.data(), static_cast<std::streamsize>(page.before.size()));
  ScriptJsonEscaper escaper([&file](std::string_view piece) {
    file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
  });
  data.whole([&escaper](std::string_view piece) { escaper.write(piece); });
  escaper.finish();
  file.write(page.after.data(), static_cast<std::streamsize>(page.after.size()));
}

// Written beside the output and renamed over it; without --force an existing file stays, even
// one that appears while the page is written.
int write_html(const Options& a, const ViewerAssets& assets) {
  const std::string& out = *a.html;
  refuse_input_as_output(a.files, out);
  struct stat st {};
  if (!a.force && ::lstat(out.c_str(), &st) == 0)
    throw Error(fmt::format("{} already exists; use --force to replace it", out), kUsageError);
  std::shared_ptr<ViewData> data = made_bundle(a.files);
  StandalonePage page = standalone_html_around_data(assets);
  if (written_through(out)) {  // /dev/stdout, a FIFO, a link (output_file.hpp): --force given
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    if (file) write_page(file, page, *data);
    if (file) file.flush();
    if (!file) throw Error(fmt::format("writing {} failed: {}", out, std::strerror(errno)));
    return 0;
  }
  std::string temp = temp_beside(out);
  std::ofstream file(temp, std::ios::binary | std::ios::trunc);
  if (!file) throw Error(fmt::format("cannot write {}: {}", out, std::strerror(errno)));
  try {
    write_page(file, page, *data);
  } catch (...) {
    file.close();
    ::unlink(temp.c_str());
    throw;
  }
  int err = file ? 0 : errno;
  file.close();
  if (err == 0 && file.fail()) err = errno ? errno : EIO;
  if (err == 0) {
    int rc = a.force ? ::rename(temp.c_str(), out.c_str())
                     : ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, out.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && !a.force && errno == EINVAL) {  // a file system without RENAME_NOREPLACE
      rc = ::lstat(out.c_str(), &st) == 0 ? (errno = EEXIST, -1)
                                          : ::rename(temp.c_str(), out.c_str());
    }
    if (rc != 0) err = errno;
  }
  if (err != 0) {
    ::unlink(temp.c_str());
    if (err == EEXIST)
      throw Error(fmt::format("{} already exists; use --force to replace it", out), kUsageError);
    throw Error(fmt::format("writing {} failed: {}", out, std::strerror(err)));
  }
  return 0;
}

// Serving is sonde-view-server's, beside this executable: exec'd with the parsed options.
[[noreturn]] void exec_view_server(const Options& a) {
  std::string server = (executable_dir() / "sonde-view-server").string();
  std::vector<std::string> args = view_server_args(a.files, a.port, a.open);
  std::vector<char*> argv = {server.data()};
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execv(server.c_str(), argv.data());
  throw Error(fmt::format("cannot start {}: {}", server, std::strerror(errno)));
}

int view(const Options& a) {
  if (!a.html) exec_view_server(a);
  return write_html(a, load_viewer_assets(find_viewer_dir()));
}

}  // namespace

Command add_view(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "view", "The profile in the browser: served on 127.0.0.1 with a token, or --html FILE");
  cmd->add_option("files", a->files,
                  "Profiles written by sonde run / libsonde.so (two or more: side by side)")
      ->required();
  auto* port = cmd->add_option("-p,--port", a->port, "Port on 127.0.0.1 (0: any free port)")
                   ->check(whole_check("a port (0 to 65535)", 0, 65535))
                   ->capture_default_str();
  auto* open =
      cmd->add_flag("--open", a->open, "Start the browser ($BROWSER, else xdg-open) on the viewer");
  auto* html =
      cmd->add_option("--html", a->html, "Write one self-contained HTML file instead of serving")
          ->option_text("FILE")
          ->excludes(port)
          ->excludes(open);
  cmd->add_flag("--force", a->force, "With --html: replace FILE if it exists")->needs(html);
  cmd->footer(
      "Prints http://127.0.0.1:PORT/?token=T and serves until Ctrl-C or SIGTERM (exit 0). "
      "A missing file, a file that is not a profile or a port in use: one line, exit 2. "
      "See docs/viewer.md.");
  return {cmd, [a] { return view(*a); }};
}

}  // namespace sonde::cli
