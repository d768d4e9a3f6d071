#include "serve/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <thread>

#include <httplib.h>

#include "core/error.h"

namespace parla::serve {
namespace {

using Clock = std::chrono::steady_clock;

void reply_with(httplib::Response& res, const Reply& r) {
  res.status = r.status;
  res.set_content(r.body, r.content_type.c_str());
  if (r.retry_after > 0) res.set_header("Retry-After", std::to_string(r.retry_after));
  if (!r.allow.empty()) res.set_header("Allow", r.allow);
}

// An address as httplib reports it (numeric host) and a port.
bool same_endpoint(const sockaddr_storage& a, const std::string& host, int port) {
  char text[INET6_ADDRSTRLEN] = {0};
  int p = -1;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    p = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    p = ntohs(v6->sin6_port);
  } else {
    return false;
  }
  return p == port && host == text;
}

// The socket a request arrived on. httplib 0.11 does not hand it to handlers, so it is found among the process's
// open sockets by its two endpoints (unique for a TCP connection); -1 if not found.
int connection_socket(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* d = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (same_endpoint(peer, req.remote_addr, req.remote_port) &&
        same_endpoint(local, req.local_addr, req.local_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

// True once the peer has closed (or reset) the connection. Bytes of a next, pipelined request mean it is still
// there.
bool peer_closed(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// httplib 0.11 listens with a backlog of 5 connections (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
// library): 64 clients connecting at once overflowed the accept queue and some saw their connection reset
// (TcpExtListenOverflows counted them). listen() on a listening socket only resizes its queue, so the socket,
// which the library keeps in a protected member, is given a queue as deep as the connection threads.
class Listener : public httplib::Server {
 public:
  bool deepen_backlog(int connections) { return ::listen(svr_sock_, std::max(connections, 128)) == 0; }
};

}  // namespace

struct HttpServer::Impl {
  TranslationService& service;
  ServeConfig cfg;
  Listener server;
  std::thread thread;
  std::atomic<bool> finished{false};

  Impl(TranslationService& s, const ServeConfig& c) : service(s), cfg(c) {}

  void routes() {
    const auto threads = static_cast<size_t>(cfg.threads);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_payload_max_length(static_cast<size_t>(cfg.max_request_bytes));
    // httplib's default sets SO_REUSEPORT, which lets a second server bind a port already in use (the kernel
    // then splits connections between them); SO_REUSEADDR alone allows a restart over TIME_WAIT connections but
    // refuses a port that is being listened on.
    server.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    server.set_tcp_nodelay(true);  // answers are small: Nagle + delayed ACKs would add 40 ms to each
    server.set_keep_alive_max_count(1000);

    // The body is read here rather than by httplib, which would refuse a body over 8 KB sent as
    // application/x-www-form-urlencoded (curl -d's default type) with a 413, and parse it as a form first.
    server.Post("/translate", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& content) {
      std::string body;
      if (!content([&](const char* data, size_t n) {
            body.append(data, n);
            return true;
          })) {
        if (res.status < 400) res.status = 400;  // httplib sets 413 for a body over the limit
        return;  // the error handler writes the JSON error
      }
      int fd = -2;  // looked up once the request has to wait
      auto gone = [&] {
        if (fd == -2) fd = connection_socket(req);
        return fd >= 0 && peer_closed(fd);
      };
      reply_with(res, service.translate(body, gone));
    });
    auto simple = [this](const std::function<Reply()>& make) {
      return [this, make](const httplib::Request&, httplib::Response& res) {
        const auto arrived = Clock::now();
        Reply r = make();
        reply_with(res, r);
        service.count(r, arrived);
      };
    };
    server.Get("/health", simple([this] { return service.health(); }));
    server.Get("/metrics", simple([this] { return service.metrics(); }));
    auto refuse = [&](const std::string& path, const std::string& allow) {
      return [this, path, allow](const httplib::Request& req, httplib::Response& res) {
        const auto arrived = Clock::now();
        Reply r = TranslationService::method_not_allowed(req.method, path, allow);
        reply_with(res, r);
        service.count(r, arrived);
      };
    };
    for (const std::string path : {"/health", "/metrics"}) {
      server.Post(path, refuse(path, "GET, HEAD"));
      server.Put(path, refuse(path, "GET, HEAD"));
      server.Delete(path, refuse(path, "GET, HEAD"));
      server.Patch(path, refuse(path, "GET, HEAD"));
      server.Options(path, refuse(path, "GET, HEAD"));
    }
    server.Get("/translate", refuse("/translate", "POST"));
    server.Put("/translate", refuse("/translate", "POST"));
    server.Delete("/translate", refuse("/translate", "POST"));
    server.Patch("/translate", refuse("/translate", "POST"));
    server.Options("/translate", refuse("/translate", "POST"));

    // Errors httplib answers itself (no route: 404; a body over serve.max_request_bytes: 413; a malformed
    // request: 400) get the same JSON body as ours. Ours already have one.
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      Reply r;
      if (res.status == 404) {
        r = TranslationService::not_found(req.path);
      } else {
        r.status = res.status;
        if (res.status == 413)
          r.body = error_body("the request body is larger than " + std::to_string(cfg.max_request_bytes) +
                              " bytes (serve.max_request_bytes)");
        else
          r.body = error_body("the request cannot be read as HTTP/1.1 (status " + std::to_string(res.status) + ")");
      }
      reply_with(res, r);
      service.count(r, Clock::now());
    });
    server.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      Reply r;
      r.status = 500;
      r.body = error_body("internal error: " + what);
      reply_with(res, r);
      service.count(r, Clock::now());
    });
  }
};

HttpServer::HttpServer(TranslationService& service, const ServeConfig& cfg)
    : impl_(std::make_unique<Impl>(service, cfg)) {
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const auto& c = impl_->cfg;
  errno = 0;
  int port = c.port;
  bool ok;
  if (c.port == 0) {
    port = impl_->server.bind_to_any_port(c.host);
    ok = port > 0;
  } else {
    ok = impl_->server.bind_to_port(c.host, c.port);
  }
  if (ok && !impl_->server.deepen_backlog(c.threads)) ok = false;
  if (!ok) {
    const int err = errno;
    throw DataError("cannot listen on " + c.host + ":" + std::to_string(c.port) +
                    " (serve.host, serve.port: --host, --port): " +
                    (err != 0 ? std::string(std::strerror(err)) : std::string("the address cannot be bound")));
  }
  return port;
}

void HttpServer::start() {
  impl_->thread = std::thread([this] {
    impl_->server.listen_after_bind();
    impl_->finished = true;
  });
}

void HttpServer::stop() {
  if (!impl_->thread.joinable()) return;
  // listen_after_bind may not have entered its loop yet, and stop() does nothing before it has.
  for (int i = 0; i < 5000 && !impl_->server.is_running() && !impl_->finished; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace parla::serve
