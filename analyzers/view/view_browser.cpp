#include "view/view_browser.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include "programs/launcher.hpp"

extern char** environ;

namespace sonde::analyzers {

namespace {

std::string private_dir() {
  for (const char* name : {"XDG_RUNTIME_DIR", "TMPDIR"}) {
    const char* dir = std::getenv(name);
    struct stat st {};
    if (dir && *dir == '/' && ::stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
        ::access(dir, W_OK) == 0)
      return dir;
  }
  return "/tmp";
}

// The page the browser is pointed at; nullopt (and one line) when it cannot be written.
std::optional<std::string> write_redirect(const std::string& url) {
  std::string path = private_dir() + "/sonde-view-XXXXXX.html";
  int fd = ::mkstemps(path.data(), 5);  // mode 0600
  if (fd < 0) {
    fmt::print(stderr, "sonde view: cannot write the page to open ({}); open the URL above\n",
               std::strerror(errno));
    return std::nullopt;
  }
  // The URL is ours (digits, hex, ':/?='): nothing in it needs escaping.
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"0;url={0}\"><title>sonde view</title></head>\n"
      "<body><a href=\"{0}\">Open the sonde viewer</a></body></html>\n",
      url);
  bool ok = ::write(fd, page.data(), page.size()) == static_cast<ssize_t>(page.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    fmt::print(stderr, "sonde view: cannot write {}; open the URL above\n", path);
    ::unlink(path.c_str());
    return std::nullopt;
  }
  return path;
}

std::vector<std::string> browser_command(const std::string& target) {
  std::vector<std::string> argv;
  const char* env = std::getenv("BROWSER");
  std::string spec = env && *env ? std::string(env).substr(0, std::string(env).find(':'))
                                 : std::string("xdg-open");
  std::istringstream words(spec);
  bool placed = false;
  for (std::string word; words >> word;) {
    if (std::size_t at = word.find("%s"); at != std::string::npos) {
      word.replace(at, 2, target);
      placed = true;
    }
    argv.push_back(word);
  }
  if (!placed) argv.push_back(target);
  return argv;
}

}  // namespace

BrowserLaunch& BrowserLaunch::operator=(BrowserLaunch&& other) noexcept {
  if (this != &other) {
    finish();
    pid_ = std::exchange(other.pid_, -1);
    redirect_file_ = std::exchange(other.redirect_file_, {});
    program_ = std::exchange(other.program_, {});
  }
  return *this;
}

void BrowserLaunch::poll() {
  if (pid_ <= 0) return;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return;
  pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fmt::print(stderr, "sonde view: {} failed ({}); open the URL above\n", program_,
               WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                 : fmt::format("signal {}", WTERMSIG(status)));
}

void BrowserLaunch::finish() {
  if (!redirect_file_.empty()) ::unlink(redirect_file_.c_str());
  redirect_file_.clear();
}

BrowserLaunch open_browser(const std::string& url) {
  std::optional<std::string> page = write_redirect(url);
  if (!page) return {};
  std::vector<std::string> words = browser_command("file://" + *page);
  std::optional<std::string> program = resolve_command(words.front());
  if (!program) {
    fmt::print(stderr,
               "sonde view: no browser to start ({} not found; set BROWSER); open the "
               "URL above\n",
               words.front());
    ::unlink(page->c_str());
    return {};
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  // The browser gets the default signal handling and mask back (sonde view blocks SIGINT and
  // SIGTERM and ignores SIGPIPE and SIGXFSZ), no terminal input, and its chatter on stderr:
  // stdout carries the URL for scripts.
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t files;
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_init(&files);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGXFSZ}) sigaddset(&defaults, sig);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  ::posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&files, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = -1;
  int err = ::posix_spawn(&pid, program->c_str(), &files, &attr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&files);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) {
    fmt::print(stderr, "sonde view: cannot start {}: {}; open the URL above\n", *program,
               std::strerror(err));
    ::unlink(page->c_str());
    return {};
  }
  return BrowserLaunch(pid, *page, words.front());
}

}  // namespace sonde::analyzers
