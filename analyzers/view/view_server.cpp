#include "view/view_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "base/deep_stack.hpp"
#include "profile/profile_file.hpp"
#include "view/view_browser.hpp"

namespace sonde::analyzers {

namespace {

using Body = std::shared_ptr<const std::string>;

struct Resource {
  const char* path;
  const char* content_type;
};
constexpr std::array kResources{
    Resource{"/", "text/html; charset=utf-8"},
    Resource{"/app.js", "text/javascript; charset=utf-8"},
    Resource{"/app.css", "text/css; charset=utf-8"},
    Resource{"/data.json", "application/json"},
};

const Resource* find_resource(const std::string& path) {
  for (const Resource& r : kResources)
    if (path == r.path) return &r;
  return nullptr;
}

void refuse(httplib::Response& res, int status, const char* why) {
  res.status = status;
  res.set_content(fmt::format("{} {}\n", status, why), "text/plain; charset=utf-8");
}

// A sized provider: no copy of the body per request, and cpp-httplib does not compress it (brotli
// at its default quality took seconds per MB).
void send(httplib::Response& res, Body body, const char* content_type) {
  if (body->empty()) {
    res.set_content("", content_type);
    return;
  }
  std::size_t size = body->size();
  res.set_content_provider(
      size, content_type,
      [body = std::move(body)](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        return sink.write(body->data() + offset, std::min(length, body->size() - offset));
      });
}

std::string cookie_value(const httplib::Request& req, const std::string& name) {
  for (std::size_t i = 0, n = req.get_header_value_count("Cookie"); i < n; ++i) {
    std::string header = req.get_header_value("Cookie", i);
    std::size_t from = 0;
    while (from <= header.size()) {
      std::size_t end = header.find(';', from);
      if (end == std::string::npos) end = header.size();
      std::string_view part(header.data() + from, end - from);
      while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
      if (part.size() > name.size() && part.substr(0, name.size()) == name &&
          part[name.size()] == '=')
        return std::string(part.substr(name.size() + 1));
      from = end + 1;
    }
  }
  return {};
}

}  // namespace

std::string make_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(fmt::format("no random token: getrandom: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

bool token_matches(std::string_view given, std::string_view token) {
  if (given.size() != token.size() || token.empty()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < token.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

struct ViewServer::Impl {
  httplib::Server server;
  std::string token = make_token();
  int port = 0;
  std::array<Body, kResources.size()> bodies;
  std::shared_ptr<ViewData> data;

  Body& body_of(const Resource* r) {
    return bodies[static_cast<std::size_t>(r - kResources.data())];
  }
  std::string cookie_name() const { return fmt::format("sonde_token_{}", port); }

  bool authorised(const httplib::Request& req) const {
    if (req.has_param("token")) return token_matches(req.get_param_value("token"), token);
    return token_matches(cookie_value(req, cookie_name()), token);
  }

  // `localhost`, `127.0.0.1` or `[::1]`, with any port or none.
  static bool loopback_host(std::string_view host) {
    std::string_view name = host, port;
    if (host.starts_with('[')) {
      std::size_t end = host.find(']');
      if (end == std::string_view::npos) return false;
      name = host.substr(0, end + 1);
      port = host.substr(end + 1);
      if (!port.empty() && !port.starts_with(':')) return false;
      if (!port.empty()) port.remove_prefix(1);
    } else if (std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
      name = host.substr(0, colon);
      port = host.substr(colon + 1);
    }
    if (host.find(':') != host.rfind(':') && !host.starts_with('[')) return false;
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    return name == "localhost" || name == "127.0.0.1" || name == "[::1]";
  }

  // Every request goes through here first; what it refuses never reaches a route.
  httplib::Server::HandlerResponse screen(const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    // A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own
    // name as Host. The name is the protection, not the port: a tunnel (`ssh -L 9000:localhost:
    // 8080`) or a forwarded port brings the browser's own port.
    if (!loopback_host(req.get_header_value("Host"))) {
      refuse(res, 403, "forbidden: unexpected Host");
      return R::Handled;
    }
    if (req.path.find("..") != std::string::npos || req.target.find('\\') != std::string::npos) {
      refuse(res, 400, "refused: '..' in the path");
      return R::Handled;
    }
    const Resource* resource = find_resource(req.path);
    if (!resource) {
      refuse(res, 404, "not found");
      return R::Handled;
    }
    if (req.method != "GET" && req.method != "HEAD") {
      refuse(res, 405, "method not allowed");
      return R::Handled;
    }
    if (!authorised(req)) {
      refuse(res, 403, "forbidden: open the URL with the token that sonde view printed");
      return R::Handled;
    }
    return R::Unhandled;
  }

  void route(const httplib::Request& req, httplib::Response& res) {
    const Resource* resource = find_resource(req.path);
    if (!resource) return refuse(res, 404, "not found");
    if (resource == &kResources[0])
      // Lets the page's own requests (app.js, data.json) through without the token in their
      // URLs; per port, so two viewers in one browser do not overwrite each other's.
      res.set_header("Set-Cookie",
                     fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict", cookie_name(), token));
    if (resource == &kResources[3]) return send_data(req, res);
    send(res, body_of(resource), resource->content_type);
  }

  // The page asks for the index, then the parts its first panel draws, then the rest.
  void send_data(const httplib::Request& req, httplib::Response& res) {
    const char* type = kResources[3].content_type;
    std::string part = req.get_param_value("part");
    try {
      // Made on a stack that holds the deepest tree's walks (a 60,000-deep path's request
      // killed the server with SIGSEGV on a worker's 8 MiB).
      Body body;
      bool found = true;
      on_deep_stack([&] {
        if (!req.has_param("part")) {
          body = std::make_shared<const std::string>(data->whole());
        } else if (part == "index") {
          body = std::make_shared<const std::string>(data->index());
        } else if (part == "diff") {
          body = std::make_shared<const std::string>(data->diff());
        } else {
          std::string profile = req.get_param_value("profile");
          std::size_t index = 0;
          auto [end, ec] = std::from_chars(profile.data(), profile.data() + profile.size(), index);
          if (ec == std::errc() && end == profile.data() + profile.size() && !profile.empty())
            body = data->part(index, part);
          found = body != nullptr;
        }
      });
      if (!found) return refuse(res, 404, "not found: no such part or profile");
      send(res, std::move(body), type);
    } catch (const std::exception& e) {
      // A file that went bad after it was opened: the page shows the line in that panel.
      fmt::print(stderr, "sonde view: {}\n", e.what());
      refuse(res, 500, e.what());
    }
  }
};

ViewServer::ViewServer(ViewerAssets assets) : impl_(std::make_unique<Impl>()) {
  auto own = [](std::string& s) { return std::make_shared<const std::string>(std::move(s)); };
  impl_->bodies[0] = own(assets.index_html);
  impl_->bodies[1] = own(assets.app_js);
  impl_->bodies[2] = own(assets.app_css);
  httplib::Server& s = impl_->server;
  s.set_default_headers({{"Cache-Control", "no-store"},
                         {"X-Content-Type-Options", "nosniff"},
                         {"Referrer-Policy", "no-referrer"},
                         {"X-Frame-Options", "DENY"},
                         // No inline script or event attribute runs, even if a name ever
                         // reached the page as markup; nothing is loaded from elsewhere.
                         {"Content-Security-Policy",
                          "default-src 'none'; script-src 'self'; style-src 'self' "
                          "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}});
  // A browser keeps idle connections; short timeouts let SIGTERM end the server within a
  // second or two, and a client that sends nothing cannot hold a worker for long.
  s.set_keep_alive_timeout(1);
  s.set_read_timeout(2);
  s.set_write_timeout(10);
  s.set_payload_max_length(64 * 1024);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return impl_->screen(req, res);
  });
  s.Get(".*",
        [this](const httplib::Request& req, httplib::Response& res) { impl_->route(req, res); });
}

ViewServer::~ViewServer() = default;

void ViewServer::bind(int port) {
  httplib::Server& s = impl_->server;
  s.set_address_family(AF_INET);
  // cpp-httplib's default sets SO_REUSEPORT, with which a second `sonde view --port N` binds the
  // same port as the first and the kernel splits the connections between them. SO_REUSEADDR
  // only lets a restart reuse a port whose old connections are in TIME_WAIT. (cpp-httplib makes
  // the socket close-on-exec itself, so the browser --open starts does not keep the port.)
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  errno = 0;
  int bound =
      port == 0 ? s.bind_to_any_port("127.0.0.1") : (s.bind_to_port("127.0.0.1", port) ? port : -1);
  if (bound <= 0) {
    int err = errno;
    if (err == EADDRINUSE)
      throw Error(
          fmt::format("127.0.0.1:{} is in use; choose another --port (0: any free port)", port), 2);
    throw Error(
        fmt::format("cannot listen on 127.0.0.1:{}: {}{}", port,
                    err ? std::strerror(err) : "failed",
                    err == EACCES && port < 1024 ? " (ports below 1024 need privileges)" : ""),
        2);
  }
  impl_->port = bound;
}

std::string ViewServer::url() const {
  return fmt::format("http://127.0.0.1:{}/?token={}", impl_->port, impl_->token);
}

int ViewServer::serve(std::shared_ptr<ViewData> data, bool open,
                      const std::function<bool()>& ready) {
  impl_->data = std::move(data);
  httplib::Server& s = impl_->server;
  // The signals are taken with sigtimedwait, so stop() runs in this thread and not in a signal
  // handler; the server's threads, started after this, inherit the mask.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  // cpp-httplib sends without MSG_NOSIGNAL (strace: sendto(..., 0)); a write to a browser that
  // has gone must fail, not end the server.
  ::signal(SIGPIPE, SIG_IGN);

  std::atomic<bool> done{false};
  bool listened = true;
  std::thread listener([&] {
    listened = s.listen_after_bind();
    done = true;
  });
  while (!s.is_running() && !done) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  bool announced = ready();
  // While the browser starts and loads the page, the first panel's data is made.
  std::thread prepare;
  if (announced)
    prepare =
        std::thread([data = impl_->data] { on_deep_stack([&] { data->prepare_first_panel(); }); });
  BrowserLaunch browser;
  if (open && announced) browser = open_browser(url());
  bool stopped = !announced;
  while (!done && announced) {
    timespec tick{0, 200'000'000};
    int sig = ::sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      stopped = true;
      break;
    }
    browser.poll();
  }
  // stop() waits for the server's threads, and one may be computing a part (a 1M-path
  // profile's metrics: 20 s at load); the viewer writes nothing, so after a grace period the
  // process ends without them, with the status a clean stop has.
  std::atomic<bool> joined{false};
  std::thread grace([&] {
    for (int i = 0; i < 20 && !joined; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (joined) return;
    browser.finish();
    std::fflush(nullptr);
    std::_Exit(stopped && announced ? 0 : 1);
  });
  s.stop();
  listener.join();
  if (prepare.joinable()) prepare.join();
  joined = true;
  grace.join();
  browser.poll();
  browser.finish();
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (!announced) return 1;
  if (!stopped || !listened) {
    fmt::print(stderr, "sonde view: the server stopped unexpectedly\n");
    return 1;
  }
  return 0;
}

}  // namespace sonde::analyzers
