// `sonde view --open`: starts the user's browser on the viewer without putting the token on a
// command line (any local user can read those in /proc for as long as the browser runs).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace sonde::analyzers {

class BrowserLaunch {
 public:
  BrowserLaunch() = default;
  BrowserLaunch(pid_t pid, std::string redirect_file, std::string program)
      : pid_(pid), redirect_file_(std::move(redirect_file)), program_(std::move(program)) {}
  BrowserLaunch(BrowserLaunch&& other) noexcept { *this = std::move(other); }
  BrowserLaunch& operator=(BrowserLaunch&& other) noexcept;
  ~BrowserLaunch() { finish(); }

  // Reaps the launcher once it has exited; says once when it failed.
  void poll();
  // Removes the redirect file. The browser itself is left running.
  void finish();

 private:
  pid_t pid_ = -1;
  std::string redirect_file_;
  std::string program_;
};

// Writes a page readable by the user only ($XDG_RUNTIME_DIR, else $TMPDIR or /tmp) that
// redirects to `url`, and starts $BROWSER (the first of its ':'-separated commands; "%s" is
// replaced by the page, else it is appended) or xdg-open on it. Never fails: when nothing can
// be started it says so in one line and the server goes on.
BrowserLaunch open_browser(const std::string& url);

}  // namespace sonde::analyzers
