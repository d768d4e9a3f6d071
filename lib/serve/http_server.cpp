#include "serve/http_server.h"

// Why Boost.Beast (over Asio), compared with libmicrohttpd, the other event-driven HTTP/1.1 server library
// Debian packages (0.9.75; libevent's evhttp and h2o 2.2 were looked at too):
//   - deadlines: a Beast stream's expiry covers every read of an operation, so "the whole header within
//     serve.header_timeout_s" is one line and a slowloris client that sends a byte every 3 s is cut at 10 s;
//     libmicrohttpd's MHD_OPTION_CONNECTION_TIMEOUT is an inactivity timeout, which such a client never trips;
//   - limits at the parser: header bytes, body bytes checked on the decoded (de-chunked) body, and a body type
//     of our own that counts every byte against a process-wide budget before it is stored;
//   - the answer is written when the decoding thread says it is ready, from any thread, by posting to the
//     event loop, where libmicrohttpd needs suspend/resume of the connection around it;
//   - it is C++ and header-only (one translation unit pays its compile time, ~40 s), and nothing new is linked.
// The price is that Beast leaves policy to us: connection caps, eviction, lingering close and keep-alive limits
// are written here.
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/heap_allocator.h"

namespace parla::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// How long a connection that is being closed keeps reading (and dropping) what its client still sends, so that
// the answer is not destroyed by a reset (closing a socket with unread bytes sends one): nginx's lingering close.
constexpr auto kLinger = std::chrono::seconds(1);
// How often a waiting request checks that its client is still there.
constexpr auto kWatch = std::chrono::milliseconds(50);
// File descriptors kept for everything but connections (model files, logs, the listening socket, ...).
constexpr int kReservedDescriptors = 64;
// Connections beyond serve.max_connections, opened only when every connection has a request in flight: they may
// ask GET /health or /metrics (then close); a /translate on one gets 503 unless an ordinary place has come free.
// So a load balancer's probe is answered when requests fill every place (issue 59: 12 of 14 probes got 503).
constexpr int kProbeReserve = 16;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

bool iequals(beast::string_view a, beast::string_view b) { return beast::iequals(a, b); }

// Request body bytes held in memory by all connections together (serve.max_buffered_bytes).
class ByteBudget {
 public:
  explicit ByteBudget(int64_t limit) : limit_(limit) {}
  bool take(size_t n) {
    const auto add = static_cast<int64_t>(n);
    if (used_.fetch_add(add) + add > limit_) {
      used_.fetch_sub(add);
      return false;
    }
    return true;
  }
  void give(size_t n) { used_.fetch_sub(static_cast<int64_t>(n)); }

 private:
  std::atomic<int64_t> used_{0};
  const int64_t limit_;
};

// A request body as Beast's parser fills it (already de-chunked), each byte counted against the ByteBudget
// before it is stored. Nothing is reserved for a Content-Length: it is a claim, not bytes.
struct BudgetedBody {
  class value_type {
   public:
    value_type() = default;
    value_type(value_type&& o) noexcept : data(std::move(o.data)), budget(o.budget), held(o.held) { o.held = 0; }
    value_type& operator=(value_type&& o) noexcept {
      if (this != &o) {
        release();
        data = std::move(o.data);
        budget = o.budget;
        held = o.held;
        o.held = 0;
      }
      return *this;
    }
    value_type(const value_type&) = delete;
    value_type& operator=(const value_type&) = delete;
    ~value_type() { release(); }
    void release() {
      if (budget && held) budget->give(held);
      held = 0;
      std::string().swap(data);
    }
    std::string data;
    ByteBudget* budget = nullptr;
    size_t held = 0;
  };
  static std::uint64_t size(const value_type& v) { return v.data.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
    template <class Buffers>
    std::size_t put(const Buffers& buffers, beast::error_code& ec) {
      const size_t n = asio::buffer_size(buffers);
      if (!body_.budget || !body_.budget->take(n)) {
        ec = asio::error::no_buffer_space;
        return 0;
      }
      body_.held += n;
      const size_t at = body_.data.size();
      body_.data.resize(at + n);
      asio::buffer_copy(asio::buffer(&body_.data[at], n), buffers);
      ec = {};
      return n;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// Compares in time that depends on the lengths only, not on where the first difference is.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

class Session;

}  // namespace

struct HttpServer::Impl {
  TranslationService& service;
  ServeConfig cfg;
  ByteBudget budget;
  std::string api_header;  // "Bearer <key>", or empty
  int max_connections = 0;
  // Declared after what handlers use, so that the sessions its destructor destroys find it alive.
  asio::io_context io{1};
  // Accepting has a thread and an epoll set of its own: on the event loop, a new connection's readiness queues
  // behind every other ready socket (10,000 slowloris clients closing at once are ~80 epoll batches of 128), so a
  // fresh client waited up to 0.6 s. Here it is accepted at once and handed to the loop, where its first read is
  // attempted on the spot, behind at most one batch.
  asio::io_context accept_io{1};
  tcp::acceptor acceptor{accept_io};
  asio::steady_timer accept_retry{accept_io};
  asio::steady_timer trim_timer{io};
  std::optional<asio::thread_pool> pool;
  std::thread loop;
  std::thread accept_loop;
  std::array<char, 65536> scratch{};  // lingering reads land here (one loop thread: never two at once)

  // Event-loop thread only.
  std::unordered_set<Session*> sessions;
  std::list<Session*> waiting;  // sessions without a request in flight, oldest first: evicted first
  std::list<Session*> waiting_reserve;  // the same among the probe reserve's sessions
  // Connections by client address (its 16 bytes, IPv4 mapped): a flood from one address is held to
  // serve.max_connections_per_address, and at the cap pushes out its own connections before anyone else's.
  struct Peer {
    int open = 0;
    std::list<Session*> waiting;  // its ordinary sessions without a request in flight, oldest first
  };
  std::unordered_map<std::string, Peer> peers;
  std::set<std::pair<int, std::string>> by_open;  // (open, address): the last has the most connections
  int reserve_open = 0;          // sessions in the probe reserve
  bool accepting = true;
  int busy = 0;                  // sessions with a request in flight
  bool active_since_trim = false;
  std::string refusal;           // the canned 503 at max_connections
  std::string refusal_address;   // the canned 503 at max_connections_per_address

  Reply connections_full() const {
    return TranslationService::overloaded("the server has its limit of " + std::to_string(max_connections) +
                                          " connections open, each with a request in flight "
                                          "(serve.max_connections); retry later");
  }

  // Open connections, for wait_closed() from other threads.
  std::mutex count_mutex;
  std::condition_variable count_changed;
  int open = 0;

  Impl(TranslationService& s, const ServeConfig& c)
      : service(s), cfg(c), budget(c.max_buffered_bytes),
        api_header(c.api_key.empty() ? std::string() : "Bearer " + c.api_key) {}

  void accept();  // accept thread
  void on_accept(tcp::socket socket);  // event loop
  void close_acceptor();  // accept thread
  void refuse(tcp::socket& socket, const std::string& answer, const char* reason);
  Session* victim();
  void peer_opened(const std::string& address);
  void peer_closed(const std::string& address);
  int ordinary_open() const { return static_cast<int>(sessions.size()) - reserve_open; }
  void schedule_trim();
  void opened() {
    std::lock_guard<std::mutex> lock(count_mutex);
    ++open;
  }
  void closed() {
    std::lock_guard<std::mutex> lock(count_mutex);
    --open;
    count_changed.notify_all();
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket, std::string address, bool reserve)
      : server_(server),
        stream_(std::move(socket)),
        buffer_(static_cast<size_t>(server.cfg.max_header_bytes) + 4096),
        watch_(server.io),
        header_deadline_(server.io),
        address_(std::move(address)),
        reserve_(reserve) {}

  void start() {
    server_.sessions.insert(this);
    if (reserve_) ++server_.reserve_open;
    server_.peer_opened(address_);
    server_.opened();
    server_.service.connection_opened();
    read_request();
  }

  // From the event loop. Pending operations complete with operation_aborted and find the session closed.
  void close(const std::string& reason) {
    if (state_ == State::closed) return;
    if (state_ == State::busy) --server_.busy;
    state_ = State::closed;
    unlist();
    server_.sessions.erase(this);
    if (reserve_) --server_.reserve_open;
    server_.peer_closed(address_);
    if (job_) {  // a request in flight whose client is gone (or the server stops): its sentences are dropped
      server_.service.abandon(*job_);
      job_.reset();
    }
    watch_.cancel();
    header_deadline_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    server_.service.connection_closed(reason);
    server_.closed();
  }

  // A connection that waits for (or sends) a request, or lingers after its last answer, can be closed to make
  // room; one with a request in flight cannot.
  bool waiting() const { return listed_; }

  // Drain cut short (a second SIGTERM, or the drain timeout): a request still waiting for its translation is
  // answered 503 now, since the batch that holds its sentences may outlast the process.
  void fail_in_flight() {
    if (state_ != State::busy || !job_) return;
    job_.reset();
    watch_.cancel();
    keep_alive_ = false;
    answer(TranslationService::overloaded("the server is stopping before this request was translated; retry "
                                          "with another server"));
  }

 private:
  enum class State { reading, busy, lingering, closed };

  void list() {
    if (listed_) return;
    if (reserve_) {
      place_ = server_.waiting_reserve.insert(server_.waiting_reserve.end(), this);
    } else {
      place_ = server_.waiting.insert(server_.waiting.end(), this);
      auto& peer = server_.peers[address_].waiting;
      peer_place_ = peer.insert(peer.end(), this);
    }
    listed_ = true;
  }
  void unlist() {
    if (!listed_) return;
    if (reserve_) {
      server_.waiting_reserve.erase(place_);
    } else {
      server_.waiting.erase(place_);
      server_.peers[address_].waiting.erase(peer_place_);
    }
    listed_ = false;
  }
  void set_busy() {
    if (state_ != State::busy) ++server_.busy;
    state_ = State::busy;
    unlist();
  }
  void set_idle(State s) {
    if (state_ == State::busy) --server_.busy;
    state_ = s;
  }

  // Beast's parser checks its header limit per put() of one read, and fields it has parsed leave no partial line
  // behind: `a:\r\n` x 60,000,000 written in one go passed a limit of 8 KiB, stored every field (3.8 GB) and
  // was answered 200 (issue 59). So the header is gathered here first, its bytes and lines counted across every
  // read, and handed to the parser whole; its deadline is a timer of its own, which fires however the bytes come.
  void read_request() {
    set_idle(State::reading);
    list();
    parser_.emplace();
    // Never reached: the header handed over is already held to serve.max_header_bytes.
    parser_->header_limit(static_cast<std::uint32_t>(server_.cfg.max_header_bytes) + 1);
    parser_->body_limit(static_cast<std::uint64_t>(server_.cfg.max_request_bytes));
    head_ = false;
    header_scanned_ = 0;
    header_fields_ = 0;
    header_skipped_ = 0;
    in_header_ = true;
    // From the connection's start or its previous answer to the end of the headers: idle and slow alike.
    stream_.expires_never();
    header_deadline_.expires_after(seconds(server_.cfg.header_timeout_s));
    header_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ != State::reading || !self->in_header_) return;
      self->arrived_ = Clock::now();
      self->close("header_timeout");
    });
    scan_header();
  }

  // Looks for the blank line that ends the header in what has arrived; reads more while there is none.
  void scan_header() {
    const auto& cfg = server_.cfg;
    // Empty lines before a request line are ignored (RFC 9112 2.2), as some clients send one after a body; they
    // count against the header's bytes all the same.
    if (header_scanned_ == 0) {
      const auto* bytes = static_cast<const char*>(buffer_.data().data());
      size_t blank = 0;
      while (blank < buffer_.size() && (bytes[blank] == '\r' || bytes[blank] == '\n')) ++blank;
      buffer_.consume(blank);
      header_skipped_ += blank;
    }
    const auto* bytes = static_cast<const char*>(buffer_.data().data());
    const size_t size = buffer_.size();
    size_t end = 0;  // one past the blank line, once found
    while (header_scanned_ < size) {
      const void* found = std::memchr(bytes + header_scanned_, '\n', size - header_scanned_);
      if (!found) break;
      const size_t eol = static_cast<size_t>(static_cast<const char*>(found) - bytes);
      if (eol == 0 || bytes[eol - 1] != '\r') return refuse_header(TranslationService::malformed("bad line ending"));
      const bool blank = eol == header_scanned_ + 1;
      if (!blank && header_scanned_ > 0) ++header_fields_;  // the first line is the request line
      header_scanned_ = eol + 1;
      if (blank) {
        end = header_scanned_;
        break;
      }
    }
    const size_t held = (end ? end : size) + header_skipped_;
    if (held > static_cast<size_t>(cfg.max_header_bytes))
      return refuse_header(TranslationService::header_too_large(cfg.max_header_bytes));
    if (header_fields_ > cfg.max_header_fields) {
      Reply r;
      r.status = 431;
      r.body = error_body("the request has more than " + std::to_string(cfg.max_header_fields) +
                          " header fields (serve.max_header_fields)");
      return refuse_header(std::move(r));
    }
    if (end) {
      beast::error_code ec;
      size_t used = 0;
      while (used < end && !ec && !parser_->is_header_done())
        used += parser_->put(asio::buffer(bytes + used, end - used), ec);
      buffer_.consume(used);
      in_header_ = false;
      header_deadline_.cancel();
      if (!ec && !parser_->is_header_done()) ec = http::error::partial_message;
      return on_header(ec);
    }
    const size_t room = buffer_.max_size() - size;
    if (room == 0) return refuse_header(TranslationService::header_too_large(cfg.max_header_bytes));
    stream_.async_read_some(buffer_.prepare(std::min<size_t>(room, 16384)),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (self->state_ == State::closed) return;
                              if (ec) return self->read_failed(ec, "header_timeout");
                              self->buffer_.commit(n);
                              self->scan_header();
                            });
  }

  // A header refused before the parser saw it: answered, then the connection closes (its bytes are not read on).
  void refuse_header(Reply r) {
    in_header_ = false;
    header_deadline_.cancel();
    arrived_ = Clock::now();
    keep_alive_ = false;
    answer(std::move(r));
  }

  void on_header(beast::error_code ec) {
    if (state_ == State::closed) return;
    if (ec) return read_failed(ec, "header_timeout");
    arrived_ = Clock::now();
    server_.active_since_trim = true;
    ++served_;
    auto& req = parser_->get();
    head_ = req.method() == http::verb::head;
    keep_alive_ = req.keep_alive();
    std::string path(req.target());
    path = path.substr(0, path.find('?'));
    const auto te = req[http::field::transfer_encoding];
    if (!te.empty() && !iequals(te, "chunked")) return answer(TranslationService::unsupported_transfer(std::string(te)));

    const auto method = req.method();
    const bool get = method == http::verb::get || method == http::verb::head;
    if (reserve_ && path == "/translate") {
      if (server_.ordinary_open() >= server_.max_connections) return answer(server_.connections_full());
      unlist();  // an ordinary place has come free since it connected: it takes it
      reserve_ = false;
      --server_.reserve_open;
    }
    if (path == "/health") {
      return answer(get ? server_.service.health()
                        : TranslationService::method_not_allowed(std::string(req.method_string()), path,
                                                                 "GET, HEAD"));
    }
    if (path == "/metrics") {
      if (!get)
        return answer(
            TranslationService::method_not_allowed(std::string(req.method_string()), path, "GET, HEAD"));
      if (!authorized()) return answer(TranslationService::unauthorized());
      return answer(server_.service.metrics());
    }
    if (path != "/translate") return answer(TranslationService::not_found(path));
    if (method != http::verb::post)
      return answer(TranslationService::method_not_allowed(std::string(req.method_string()), path, "POST"));
    if (!authorized()) return answer(TranslationService::unauthorized());
    // httplib inflated gzip bodies before its size check: a 49 KB body became 50 MB. Bodies are taken as sent.
    const auto ce = req[http::field::content_encoding];
    if (!ce.empty() && !iequals(ce, "identity")) return answer(TranslationService::unsupported_encoding(std::string(ce)));
    if (const auto length = parser_->content_length();
        length && *length > static_cast<std::uint64_t>(server_.cfg.max_request_bytes))
      return answer(TranslationService::body_too_large(server_.cfg.max_request_bytes));

    req.body().budget = &server_.budget;
    stream_.expires_after(seconds(server_.cfg.body_timeout_s));
    if (iequals(req[http::field::expect], "100-continue")) {  // curl asks before sending a body over 1 KB
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue),
                        [self = shared_from_this()](beast::error_code e, std::size_t) {
                          if (self->state_ == State::closed) return;
                          if (e) return self->read_failed(e, "body_timeout");
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (state_ == State::closed) return;
    if (ec == asio::error::no_buffer_space)
      return answer(TranslationService::overloaded(
          "the server holds its limit of request bytes (serve.max_buffered_bytes = " +
          std::to_string(server_.cfg.max_buffered_bytes) + "); retry later"));
    if (ec) return read_failed(ec, "body_timeout");
    translate();
  }

  bool authorized() const {
    if (server_.api_header.empty()) return true;
    const auto& req = parser_->get();
    return constant_time_equal(std::string(req[http::field::authorization]), server_.api_header);
  }

  void read_failed(beast::error_code ec, const char* timeout_reason) {
    arrived_ = Clock::now();
    if (ec == beast::error::timeout) return close(timeout_reason);
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == asio::error::eof ||
        ec == asio::error::operation_aborted)
      return close("done");
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
      return answer(TranslationService::header_too_large(server_.cfg.max_header_bytes));
    if (ec == http::error::body_limit)
      return answer(TranslationService::body_too_large(server_.cfg.max_request_bytes));
    if (ec.category() == http::make_error_code(http::error::bad_method).category())
      return answer(TranslationService::malformed(ec.message()));
    close("error");  // a reset, a broken pipe
  }

  // POST /translate: parsed and encoded on the pool, then waiting for the decoding thread without a thread.
  void translate() {
    set_busy();
    auto body = std::make_shared<BudgetedBody::value_type>(std::move(parser_->get().body()));
    asio::post(*server_.pool, [self = shared_from_this(), body] {
      auto job = std::make_shared<TranslationService::Job>();
      Reply reply;
      const bool queued = self->server_.service.begin(body->data, *job, reply);
      body->release();
      auto ex = self->stream_.get_executor();
      if (!queued) {
        asio::post(ex, [self, reply = std::move(reply)]() mutable { self->answer(std::move(reply), true); });
        return;
      }
      // Posted before the callback is set, so that the loop sees the wait begin before it ends.
      asio::post(ex, [self, job] { self->wait_for(job); });
      std::weak_ptr<Session> weak = self;
      job->ticket->on_done([weak, job, ex] {
        if (auto s = weak.lock()) asio::post(ex, [s, job] { s->translated(job); });
      });
    });
  }

  void wait_for(const std::shared_ptr<TranslationService::Job>& job) {
    if (state_ == State::closed) {
      server_.service.abandon(*job);
      return;
    }
    if (job->settled) return;  // already answered
    job_ = job;
    probed_ = false;
    watch();
  }

  void watch() {
    watch_.expires_after(kWatch);
    watch_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ == State::closed || !self->job_) return;
      if (self->client_gone()) return self->close("client_gone");
      self->watch();
    });
  }

  // A reset (or a socket closed by the peer and then written to) is gone; bytes of a next request or a mere end
  // of the client's sending (a half-close) are not. A closed socket and a half-closed one look alike until
  // written to, so the first time the end is seen an interim "100 Continue" is sent (every HTTP/1.1 client
  // skips 1xx answers): a client that only half-closed reads it, a closed socket answers it with a reset.
  bool client_gone() {
    const int fd = stream_.socket().native_handle();
    tcp_info info{};
    socklen_t len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_CLOSE) return true;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) {
      if (!probed_) {
        probed_ = true;
        static const char kProbe[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (send(fd, kProbe, sizeof kProbe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) return true;
      }
      return false;
    }
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }

  void translated(const std::shared_ptr<TranslationService::Job>& job) {
    if (state_ == State::closed || job_ != job) return;
    job_.reset();
    watch_.cancel();
    Reply r = server_.service.finish(*job);
    if (r.status == 0) return;
    answer(std::move(r), true);
  }

  // Writes `r`; the connection stays open for the next request when the client and the limits allow it.
  void answer(Reply r, bool counted = false) {
    if (!counted) server_.service.count(r, arrived_);
    server_.active_since_trim = true;
    set_busy();
    const bool whole = parser_ && parser_->is_done();  // otherwise an unread body follows: no next request
    const bool keep = whole && keep_alive_ && !reserve_ && server_.accepting &&
                      served_ < server_.cfg.max_keep_alive_requests;
    res_ = {};
    res_.version(11);
    res_.result(static_cast<unsigned>(r.status));
    res_.set(http::field::content_type, r.content_type);
    if (r.retry_after > 0) res_.set(http::field::retry_after, std::to_string(r.retry_after));
    if (!r.allow.empty()) res_.set(http::field::allow, r.allow);
    if (!r.www_authenticate.empty()) res_.set(http::field::www_authenticate, r.www_authenticate);
    if (!r.accept_encoding.empty()) res_.set(http::field::accept_encoding, r.accept_encoding);
    res_.body() = std::move(r.body);
    res_.keep_alive(keep);
    res_.prepare_payload();
    if (head_) res_.body().clear();  // HEAD: the GET answer's headers, Content-Length included, no body
    stream_.expires_after(seconds(server_.cfg.write_timeout_s));
    http::async_write(stream_, res_, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
      if (self->state_ == State::closed) return;
      if (ec) return self->close(ec == beast::error::timeout ? "write_timeout" : "error");
      self->res_ = {};
      if (keep) return self->next_request(Clock::now() + seconds(self->server_.cfg.write_timeout_s));
      self->linger();
    });
  }

  // A pipelined request is taken only once the previous answer has left the socket: a client that pipelines and does
  // not read (thousands of them delayed a fresh /health by a second, issue 59) gets no more answers than its receive
  // window holds, instead of one per request it sent, each rendered by the event loop. It has until
  // serve.write_timeout_s to make room, and meanwhile counts as waiting (evicted first at the cap). The wait doubles
  // from 10 ms to 250 ms: polling thousands of such clients often kept the loop busy, and at 250 ms one that has gone
  // is noticed (and its memory freed) soon enough (docs/BENCHMARKS.md, "Figures behind the code's choices").
  void next_request(Clock::time_point until, std::chrono::milliseconds wait = std::chrono::milliseconds(10)) {
    const int fd = stream_.socket().native_handle();
    int unsent = 0;
    if (buffer_.size() == 0 || ioctl(fd, SIOCOUTQNSD, &unsent) != 0 || unsent == 0) return read_request();
    // A reset leaves the count of unsent bytes as it was: the socket's state tells that the client is gone.
    tcp_info info{};
    socklen_t len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_CLOSE)
      return close("client_gone");
    if (Clock::now() >= until) return close("write_timeout");
    // Waiting on its client with no request in flight: at the cap it may be pushed out like an idle connection.
    set_idle(State::reading);
    list();
    watch_.expires_after(wait);
    watch_.async_wait([self = shared_from_this(), until, wait](beast::error_code ec) {
      if (ec || self->state_ == State::closed) return;
      self->next_request(until, std::min<std::chrono::milliseconds>(2 * wait, std::chrono::milliseconds(250)));
    });
  }

  // Ends our side, then reads and drops what the client still sends for up to kLinger (until it closes).
  void linger() {
    set_idle(State::lingering);
    list();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLinger);
    drain();
  }
  void drain() {
    stream_.async_read_some(asio::buffer(server_.scratch),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (self->state_ == State::closed) return;
                              if (ec) return self->close("done");
                              self->drain();
                            });
  }

  HttpServer::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<BudgetedBody>> parser_;
  http::response<http::string_body> res_;
  asio::steady_timer watch_;
  asio::steady_timer header_deadline_;
  const std::string address_;
  bool reserve_;  // in the probe reserve: /health and /metrics only, then closed
  State state_ = State::reading;
  std::list<Session*>::iterator place_, peer_place_;
  bool listed_ = false;
  size_t header_scanned_ = 0, header_skipped_ = 0;  // bytes of the header looked at (in buffer_) and dropped
  int header_fields_ = 0;
  bool in_header_ = false;
  int served_ = 0;
  bool head_ = false, keep_alive_ = false, probed_ = false;
  Clock::time_point arrived_ = Clock::now();
  std::shared_ptr<TranslationService::Job> job_;
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(io, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or another passing failure): try again shortly rather than spin.
      spdlog::warn("accepting a connection failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);  // answers are small: Nagle + delayed ACKs would add 40 ms to each
    asio::post(io, [this, s = std::make_shared<tcp::socket>(std::move(socket))]() mutable { on_accept(std::move(*s)); });
    accept();
  });
}

void HttpServer::Impl::close_acceptor() {
  beast::error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
}

namespace {

std::string address_key(const tcp::socket& socket) {
  beast::error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  if (ec) return {};
  const auto a = peer.address();
  const auto bytes = a.is_v4() ? asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()).to_bytes()
                               : a.to_v6().to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

std::string canned(const Reply& r) {
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
         "Connection: close\r\nContent-Length: " +
         std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
}

}  // namespace

void HttpServer::Impl::peer_opened(const std::string& address) {
  Peer& p = peers[address];
  if (p.open > 0) by_open.erase({p.open, address});
  ++p.open;
  by_open.insert({p.open, address});
}

void HttpServer::Impl::peer_closed(const std::string& address) {
  auto it = peers.find(address);
  if (it == peers.end()) return;
  by_open.erase({it->second.open, address});
  if (--it->second.open > 0) {
    by_open.insert({it->second.open, address});
  } else {
    peers.erase(it);
  }
}

// At the cap, the connection to close: the oldest waiting one of the address with the most connections, else the
// oldest waiting one of any address. A flood from one address (issue 59: 38,500 connections/s) then pushes out
// its own connections, and a client that waits between connecting and sending keeps its place.
Session* HttpServer::Impl::victim() {
  if (waiting.empty()) return nullptr;
  if (!by_open.empty()) {
    const auto& most = peers[by_open.rbegin()->second];
    if (most.open > 1 && !most.waiting.empty()) return most.waiting.front();
  }
  return waiting.front();
}

void HttpServer::Impl::on_accept(tcp::socket socket) {
  if (!accepting) {
    beast::error_code ec;
    socket.close(ec);
    return;
  }
  std::string address = address_key(socket);
  if (cfg.max_connections_per_address > 0) {
    const auto it = peers.find(address);
    if (it != peers.end() && it->second.open >= cfg.max_connections_per_address) {
      refuse(socket, refusal_address, "per_address");
      return;
    }
  }
  bool reserve = false;
  if (ordinary_open() >= max_connections) {
    if (Session* v = victim()) {
      v->close("evicted");
    } else if (reserve_open < kProbeReserve) {
      reserve = true;  // every ordinary connection has a request in flight
    } else if (!waiting_reserve.empty()) {
      waiting_reserve.front()->close("evicted");
      reserve = true;
    } else {
      refuse(socket, refusal, "refused");
      return;
    }
  }
  std::make_shared<Session>(*this, std::move(socket), std::move(address), reserve)->start();
}

// Told so without reading its request: every connection and the probe reserve have a request in flight, or its
// address has its limit of connections.
void HttpServer::Impl::refuse(tcp::socket& socket, const std::string& answer, const char* reason) {
  const int fd = socket.native_handle();
  if (send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    // Nothing to do: the connection is closed either way.
  }
  beast::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
  service.connection_opened();
  service.connection_closed(reason);
}

// The heap keeps freed memory (glibc's is told to, for decoding speed: runtime::tune_process; tcmalloc keeps its
// free pages until it decides), so after a burst of large requests the server would hold its peak. Once no request
// is in flight, what is free is given back.
void HttpServer::Impl::schedule_trim() {
  trim_timer.expires_after(std::chrono::seconds(1));
  trim_timer.async_wait([this](beast::error_code ec) {
    if (ec) return;
    if (busy == 0 && active_since_trim) {
      active_since_trim = false;
      asio::post(*pool, [] { return_free_memory(); });
    }
    schedule_trim();
  });
}

HttpServer::HttpServer(TranslationService& service, const ServeConfig& cfg)
    : impl_(std::make_shared<Impl>(service, cfg)) {
  // Connections need descriptors: the soft limit is raised to the hard one, and the connection limit fits it.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  impl_->max_connections = cfg.max_connections;
  const auto fit = static_cast<long long>(lim.rlim_cur) - kReservedDescriptors - kProbeReserve;
  if (lim.rlim_cur != RLIM_INFINITY && fit < impl_->max_connections) {
    impl_->max_connections = static_cast<int>(std::max<long long>(1, fit));
    spdlog::warn("serve.max_connections lowered from {} to {}: the file-descriptor limit is {} (ulimit -n)",
                 cfg.max_connections, impl_->max_connections, static_cast<long long>(lim.rlim_cur));
  }
  impl_->refusal = canned(impl_->connections_full());
  impl_->refusal_address = canned(TranslationService::overloaded(
      "your address has its limit of " + std::to_string(cfg.max_connections_per_address) +
      " connections open (serve.max_connections_per_address); retry later"));
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::max_connections() const { return impl_->max_connections; }

int HttpServer::bind() {
  const auto& c = impl_->cfg;
  beast::error_code ec;
  auto fail = [&](const std::string& why) {
    throw DataError("cannot listen on " + c.host + ":" + std::to_string(c.port) +
                    " (serve.host, serve.port: --host, --port): " + why);
  };
  tcp::resolver resolver(impl_->io);
  auto found = resolver.resolve(c.host, std::to_string(c.port), tcp::resolver::passive, ec);
  if (ec || found.empty()) fail(ec ? ec.message() : "the address cannot be resolved");
  const tcp::endpoint at = found.begin()->endpoint();
  auto& a = impl_->acceptor;
  a.open(at.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);  // a restart over TIME_WAIT; not SO_REUSEPORT
  if (!ec) a.bind(at, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    const std::string why = ec == asio::error::address_in_use ? std::string(std::strerror(EADDRINUSE)) : ec.message();
    a.close(ec);
    fail(why);
  }
  return a.local_endpoint().port();
}

void HttpServer::start() {
  auto& i = *impl_;
  i.pool.emplace(static_cast<size_t>(std::max(1, i.cfg.threads)));
  i.accept();
  i.schedule_trim();
  i.loop = std::thread([&i] { i.io.run(); });
  i.accept_loop = std::thread([&i] { i.accept_io.run(); });
}

void HttpServer::stop_accepting() {
  auto& i = *impl_;
  if (!i.loop.joinable()) return;
  asio::post(i.accept_io, [&i] { i.close_acceptor(); });
  asio::post(i.io, [&i] {
    i.accepting = false;
    std::vector<Session*> idle(i.waiting.begin(), i.waiting.end());
    idle.insert(idle.end(), i.waiting_reserve.begin(), i.waiting_reserve.end());
    for (Session* s : idle) s->close("stopping");
  });
}

void HttpServer::fail_in_flight() {
  auto& i = *impl_;
  if (!i.loop.joinable()) return;
  asio::post(i.io, [&i] {
    std::vector<Session*> all(i.sessions.begin(), i.sessions.end());
    for (Session* s : all) s->fail_in_flight();
  });
}

bool HttpServer::wait_closed(std::chrono::duration<double> limit) {
  auto& i = *impl_;
  std::unique_lock<std::mutex> lock(i.count_mutex);
  return i.count_changed.wait_for(lock, limit, [&] { return i.open == 0; });
}

void HttpServer::stop() {
  auto& i = *impl_;
  if (!i.loop.joinable()) return;
  std::promise<void> closed;
  auto done = closed.get_future();
  i.accept_io.stop();
  if (i.accept_loop.joinable()) i.accept_loop.join();
  i.close_acceptor();  // its thread has ended: no other thread touches it now
  asio::post(i.io, [&i, &closed] {
    i.accepting = false;
    i.trim_timer.cancel();
    std::vector<Session*> all(i.sessions.begin(), i.sessions.end());
    for (Session* s : all) s->close("stopping");
    closed.set_value();
  });
  done.wait_for(std::chrono::seconds(2));
  i.io.stop();
  i.loop.join();
  if (i.pool) i.pool->join();
}

}  // namespace parla::serve
