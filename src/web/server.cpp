// The one translation unit that compiles Boost.Asio and Boost.Beast (they are costly to
// compile, and CI builds twice). Everything that can be decided without a socket is in
// request_rules, routes and messages; this file only moves bytes and keeps the bounds.
//
// Ownership: every connection is a shared object kept alive by the handlers of its pending
// operations; the io_context outlives them all. A connection to the daemon is a DaemonLink,
// a member of its owner (a terminal socket or a LIST request), whose descriptor is released
// to the client::Connection that owns it before either is destroyed.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include "web/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/events.h"
#include "common/unique_fd.h"
#include "protocol/error_code.h"
#include "web/assets.h"
#include "web/flood_gate.h"
#include "web/messages.h"
#include "web/request_rules.h"
#include "web/routes.h"
#include "web/screen_render.h"

namespace ptyvisor::web {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using Protocol = net::generic::stream_protocol;
using Stream = beast::basic_stream<Protocol>;
using Clock = std::chrono::steady_clock;
using Request = http::request<http::empty_body>;

// How long a LIST may take before it counts as failed (the daemon accepted but does not answer).
constexpr std::chrono::seconds kListTimeout{5};
// LIST at most this often, whoever asks.
constexpr std::chrono::seconds kListInterval{1};
// A terminal socket reads the daemon again once what it queued is below this.
constexpr std::size_t kResumeBelow = kMaxQueuedPerSocket / 2;
// A flooding terminal (FloodGate's Screen mode): its attach connection is read once per this,
// so that the daemon drops the flood for this observer instead of sending it to be thrown
// away here, while control notices still get through.
constexpr std::chrono::milliseconds kScreenReadPause{50};
// Output read and not sent during a flood, kept so that the final screen's offset can be
// resumed from exactly (bytes read after the SNAPSHOT was answered).
constexpr std::size_t kHeldWhileFlooding = 256 * 1024;
// Scrollback lines each screen of a flood carries (the pane's reset loses the rest).
constexpr std::uint32_t kScreenScrollback = 100;
// A SNAPSHOT that has not answered by then counts as failed. The daemon answers once its
// screen worker has caught up with the session's output, which after a flood of short lines
// takes seconds (measured: 14 s for 20 MB of `seq` on 2 loaded cores); the protocol says 20
// to 30 s cover a loaded machine.
constexpr std::chrono::seconds kSnapshotTimeout{30};
// Failed SNAPSHOTs in a row after which a terminal streams its flood as bytes again.
constexpr int kMaxSnapshotFailures = 3;
// How long SIGTERM waits for the pages to answer the WebSockets' close.
constexpr std::chrono::seconds kStopGrace{1};

constexpr std::string_view kNeedsToken = "ptyvisor web: this page needs the token printed when the console started\n";
// Scripts from the console only. 'wasm-unsafe-eval' lets asciinema-player compile its own
// WebAssembly (its terminal emulator), served from here like every script; it allows no eval
// of JavaScript and no script from elsewhere.
constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

void log(const std::string& message) { std::fprintf(stderr, "ptyvisor web: %s\n", message.c_str()); }

// State every connection shares. Lives as long as the last connection or the server.
struct Shared {
    explicit Shared(net::io_context& io, ServerConfig c) : ioc(io), config(std::move(c)) {
        hosts.unix_socket = config.unix_socket;
        hosts.port = config.port;
        hosts.listen_host = config.listen_host;
        names = [this](std::int64_t uid) {
            // Names are asked in this process (the daemon sends uids), once per uid.
            auto it = name_cache.find(uid);
            if (it == name_cache.end()) it = name_cache.emplace(uid, system_user_name(uid)).first;
            return it->second;
        };
    }
    net::io_context& ioc;
    ServerConfig config;
    HostRule hosts;
    std::size_t connections = 0;
    std::map<std::int64_t, std::string> name_cache;
    UserNamer names;
    std::shared_ptr<class Lister> lister;

    // The WebSockets, so that SIGTERM can close them with 1001 (going away) before exiting.
    std::vector<std::weak_ptr<class WsPeer>> peers;
    std::size_t open_peers = 0;
    bool stopping = false;

    // Terminal sockets attach a few at a time: the daemon lets one process hold at most
    // max_unauthenticated_per_peer (4 by default) connections that have not made their
    // request yet, and refuses more with `overloaded`. A page opening 16 terminals at once
    // would otherwise lose most of them. LIST keeps the fourth place.
    static constexpr std::size_t kMaxAttaching = 3;
    std::size_t attaching = 0;
    std::deque<std::function<void()>> waiting_to_attach;

    void enter_attaching(std::function<void()> start) {
        if (attaching < kMaxAttaching) {
            ++attaching;
            start();
        } else {
            waiting_to_attach.push_back(std::move(start));
        }
    }
    void leave_attaching() {
        if (attaching > 0) --attaching;
        while (attaching < kMaxAttaching && !waiting_to_attach.empty()) {
            auto next = std::move(waiting_to_attach.front());
            waiting_to_attach.pop_front();
            ++attaching;
            next();
        }
    }
};

// One of the kMaxConnections places; given back when the connection (HTTP or upgraded) ends.
class Slot {
public:
    Slot() = default;
    explicit Slot(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) { ++shared_->connections; }
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
        if (shared_) --shared_->connections;
    }

private:
    std::shared_ptr<Shared> shared_;
};

// Runs `f`, and `on_failure` if it throws: no exception leaves a handler.
template <class F, class G>
void guarded(F&& f, G&& on_failure) noexcept {
    try {
        f();
    } catch (const std::exception& e) {
        log(std::string("internal error: ") + e.what());
        try {
            on_failure();
        } catch (...) {
        }
    } catch (...) {
        log("internal error");
        try {
            on_failure();
        } catch (...) {
        }
    }
}

// ---- the daemon side ----------------------------------------------------------------------

// A client::Connection in the event loop: waits for its socket's readiness with Asio.
class DaemonLink {
public:
    explicit DaemonLink(net::io_context& ioc) : descriptor_(ioc) {}
    DaemonLink(const DaemonLink&) = delete;
    DaemonLink& operator=(const DaemonLink&) = delete;
    ~DaemonLink() { close(); }

    // Blocks for at most kDaemonConnectTimeout (a daemon whose listen queue is full).
    bool connect(const std::string& path, std::string& why) {
        if (!connection_.connect(path, why, kDaemonConnectTimeout)) return false;
        beast::error_code ec;
        descriptor_.assign(connection_.fd(), ec);
        if (ec) {
            why = "cannot watch the daemon connection: " + ec.message();
            return false;
        }
        return true;
    }

    client::Connection& connection() { return connection_; }
    bool open() const { return descriptor_.is_open(); }

    // Calls `f(ec)` once the socket is readable. `keep` keeps the owner (and so this) alive.
    template <class F>
    void wait_readable(std::shared_ptr<void> keep, F f) {
        if (reading_ || !descriptor_.is_open()) return;
        reading_ = true;
        descriptor_.async_wait(net::posix::stream_descriptor::wait_read,
                               [this, keep = std::move(keep), f = std::move(f)](beast::error_code ec) mutable {
                                   reading_ = false;
                                   f(ec);
                               });
    }

    // Writes what is queued; waits for writability while some is left.
    void flush(std::shared_ptr<void> keep) {
        if (!descriptor_.is_open()) return;
        connection_.flush();
        if (!connection_.wants_write() || writing_) return;
        writing_ = true;
        descriptor_.async_wait(net::posix::stream_descriptor::wait_write,
                               [this, keep = std::move(keep)](beast::error_code ec) mutable {
                                   writing_ = false;
                                   if (!ec) guarded([&] { flush(std::move(keep)); }, [] {});
                               });
    }

    // Cancels the waits and hands the descriptor back to the Connection (which closes it).
    void close() {
        if (!descriptor_.is_open()) return;
        beast::error_code ec;
        descriptor_.cancel(ec);
        (void)descriptor_.release();
    }

private:
    client::Connection connection_;
    net::posix::stream_descriptor descriptor_;
    bool reading_ = false;
    bool writing_ = false;
};

class EventsSocket;

// What one LIST said, or why there is no answer.
struct ListResult {
    bool ok = false;
    std::string error;
    std::vector<SessionRow> rows;
    std::string role;
};

// Asks the daemon for its sessions: at most once per kListInterval, only while someone wants
// the answer (an events socket is open, or an HTTP request waits for it).
class Lister : public std::enable_shared_from_this<Lister> {
public:
    using Callback = std::function<void(const ListResult&)>;

    Lister(net::io_context& ioc, std::string daemon_socket, uid_t uid, UserNamer names)
        : ioc_(ioc), daemon_socket_(std::move(daemon_socket)), uid_(uid), names_(std::move(names)), timer_(ioc) {}

    // `cb` gets a result at most kListInterval old: now if there is one, else after the next LIST.
    void fetch(Callback cb) {
        if (latest_ && Clock::now() - latest_at_ < kListInterval) {
            net::post(ioc_, [self = shared_from_this(), cb = std::move(cb)] {
                guarded([&] { cb(*self->latest_); }, [] {});
            });
            return;
        }
        waiters_.push_back(std::move(cb));
        schedule();
    }

    void subscribe(const std::shared_ptr<EventsSocket>& socket);
    void unsubscribe(const EventsSocket* socket) {
        std::erase_if(subscribers_, [&](const std::weak_ptr<EventsSocket>& w) {
            const auto s = w.lock();
            return !s || s.get() == socket;
        });
        if (subscribers_.empty() && waiters_.empty()) {
            // Nobody looks: nothing more is asked (an answer in flight is still taken).
            timer_.cancel();
            scheduled_ = false;
        }
    }

    // Where a terminal's replay begins: max(log start, end - kReplayBytes), from the last LIST.
    std::optional<std::uint64_t> replay_from(const std::string& id) const {
        if (!latest_) return std::nullopt;
        for (const auto& r : latest_->rows)
            if (r.id == id) return std::max(r.start, r.offset > kReplayBytes ? r.offset - kReplayBytes : 0);
        return std::nullopt;
    }

    std::string role() const { return latest_ && latest_->ok ? latest_->role : std::string(); }

private:
    struct Pending {
        explicit Pending(net::io_context& ioc) : link(ioc), deadline(ioc) {}
        DaemonLink link;
        net::steady_timer deadline;
        bool done = false;
    };

    // Starts a LIST as soon as the interval allows, unless one is running or due.
    void schedule() {
        if (pending_ || scheduled_) return;
        const auto due = last_started_ + kListInterval;
        if (Clock::now() >= due) {
            start();
            return;
        }
        scheduled_ = true;
        timer_.expires_at(due);
        timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
            if (ec) return;
            self->scheduled_ = false;
            guarded([&] { self->start(); }, [] {});
        });
    }

    void start() {
        if (pending_) return;
        if (subscribers_.empty() && waiters_.empty()) return;
        last_started_ = Clock::now();
        auto p = std::make_shared<Pending>(ioc_);
        pending_ = p;
        std::string why;
        if (!p->link.connect(daemon_socket_, why)) {
            finish(p, ListResult{false, why, {}, {}});
            return;
        }
        p->link.connection().use_version(5);
        p->link.connection().queue_list();
        p->link.flush(p);
        p->deadline.expires_after(kListTimeout);
        p->deadline.async_wait([self = shared_from_this(), p](beast::error_code ec) {
            if (ec || p->done) return;
            guarded([&] { self->finish(p, ListResult{false, "the daemon did not answer LIST in time", {}, {}}); },
                    [] {});
        });
        read(p);
    }

    void read(const std::shared_ptr<Pending>& p) {
        p->link.wait_readable(p, [self = shared_from_this(), p](beast::error_code ec) {
            if (ec || p->done) return;
            guarded([&] { self->on_readable(p); },
                    [&] { self->finish(p, ListResult{false, "internal error while reading LIST", {}, {}}); });
        });
    }

    void on_readable(const std::shared_ptr<Pending>& p) {
        std::vector<client::Event> events;
        std::string why;
        if (!p->link.connection().read_events(events, why)) {
            finish(p, ListResult{false, why, {}, {}});
            return;
        }
        for (auto& e : events) {
            if (auto* s = std::get_if<client::Sessions>(&e)) {
                ListResult r;
                r.ok = true;
                for (const auto& info : s->sessions) r.rows.push_back(row_from(info));
                r.role = s->role;
                if (r.role.empty()) r.role = uid_ == 0 ? "root" : "observer";
                finish(p, std::move(r));
                return;
            }
            if (auto* err = std::get_if<client::Error>(&e)) {
                finish(p, ListResult{false, std::string(protocol::to_string(err->reply.code)) + ": " + err->reply.message,
                                     {}, {}});
                return;
            }
            if (auto* v = std::get_if<client::ProtocolViolation>(&e)) {
                finish(p, ListResult{false, "protocol violation: " + v->message, {}, {}});
                return;
            }
            if (std::holds_alternative<client::Closed>(e)) {
                finish(p, ListResult{false, "the daemon closed the connection", {}, {}});
                return;
            }
        }
        read(p);
    }

    void finish(const std::shared_ptr<Pending>& p, ListResult result);

    net::io_context& ioc_;
    std::string daemon_socket_;
    uid_t uid_;
    UserNamer names_;
    net::steady_timer timer_;
    bool scheduled_ = false;
    std::shared_ptr<Pending> pending_;
    Clock::time_point last_started_{};
    std::optional<ListResult> latest_;
    Clock::time_point latest_at_{};
    std::string last_document_;  // the last "sessions" message sent to the events sockets
    std::string last_error_;
    std::vector<Callback> waiters_;
    std::vector<std::weak_ptr<EventsSocket>> subscribers_;
};

// ---- WebSockets -------------------------------------------------------------------------

// One WebSocket: reads the page's messages one at a time, writes queued messages in order,
// and closes once the queue is empty when asked to. Subclasses say what the messages mean.
class WsPeer : public std::enable_shared_from_this<WsPeer> {
public:
    WsPeer(std::shared_ptr<Shared> shared, Stream&& stream, Slot slot)
        : shared_(std::move(shared)), ws_(std::move(stream)), slot_(std::move(slot)) {}
    virtual ~WsPeer() = default;

    void run(Request request) {
        std::erase_if(shared_->peers, [](const std::weak_ptr<WsPeer>& w) { return w.expired(); });
        shared_->peers.push_back(weak_from_this());
        ++shared_->open_peers;
        counted_ = true;
        ws_.read_message_max(kMaxPageMessage);
        ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
        ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
            res.set(http::field::cache_control, "no-store");
            res.set("X-Content-Type-Options", "nosniff");
            res.set("Referrer-Policy", "no-referrer");
            res.set("X-Frame-Options", "DENY");
        }));
        ws_.async_accept(request, [self = shared_from_this()](beast::error_code ec) {
            if (ec) {
                self->finish();
                return;
            }
            self->accepted_ = true;
            if (self->shared_->stopping) return self->going_away();
            guarded(
                [&] {
                    self->read_next();
                    self->opened();
                },
                [&] { self->fail_internal(); });
        });
    }

    // The server is stopping: what is queued goes out, then a close with 1001.
    void going_away() {
        if (ended_) return;
        if (!accepted_) return finish();
        close_after_sending(websocket::close_code::going_away);
    }

protected:
    virtual void opened() = 0;
    virtual void message(bool text, std::string_view data) = 0;
    virtual void progress() {}  // a queued message went out
    virtual void ended() {}     // the socket is done; let go of what it holds

    void send_text(std::string text) { enqueue(true, std::move(text)); }
    void send_binary(std::string bytes) { enqueue(false, std::move(bytes)); }

    // Sends what is queued, then closes with `code`. Nothing queued after this is sent.
    void close_after_sending(websocket::close_code code) {
        if (close_ || ended_) return;
        close_ = code;
        write_next();
    }

    [[nodiscard]] std::size_t queued() const { return queued_; }
    [[nodiscard]] bool closing() const { return close_.has_value() || ended_; }
    Shared& shared() { return *shared_; }

    void fail_internal() {
        if (closing()) return;
        send_text(error_message("internal", "the console's server failed on this connection"));
        close_after_sending(websocket::close_code::internal_error);
    }

private:
    struct Out {
        bool text;
        std::string data;
    };

    void enqueue(bool text, std::string data) {
        if (closing()) return;
        queued_ += data.size();
        out_.push_back({text, std::move(data)});
        write_next();
    }

    void write_next() {
        if (writing_ || ended_) return;
        if (out_.empty()) {
            if (close_ && !close_sent_) {
                close_sent_ = true;
                writing_ = true;
                ws_.async_close(*close_, [self = shared_from_this()](beast::error_code) {
                    self->writing_ = false;
                    self->finish();
                });
            }
            return;
        }
        writing_ = true;
        ws_.text(out_.front().text);
        ws_.async_write(net::buffer(out_.front().data), [self = shared_from_this()](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            if (ec) {
                self->finish();
                return;
            }
            self->queued_ -= self->out_.front().data.size();
            self->out_.pop_front();
            guarded(
                [&] {
                    self->progress();
                    self->write_next();
                },
                [&] { self->finish(); });
        });
    }

    void read_next() {
        ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                // The page left, broke the protocol, or sent more than kMaxPageMessage (Beast
                // has then closed with 1009).
                self->finish();
                return;
            }
            guarded(
                [&] {
                    const auto data = beast::buffers_to_string(self->in_.data());
                    self->in_.consume(self->in_.size());
                    if (!self->closing()) self->message(self->ws_.got_text(), data);
                    self->read_next();
                },
                [&] { self->fail_internal(); });
        });
    }

    void finish() {
        if (ended_) return;
        ended_ = true;
        out_.clear();
        queued_ = 0;
        guarded([&] { ended(); }, [] {});
        beast::error_code ec;
        beast::get_lowest_layer(ws_).socket().shutdown(Protocol::socket::shutdown_both, ec);
        beast::get_lowest_layer(ws_).close();
        if (counted_) {
            counted_ = false;
            if (--shared_->open_peers == 0 && shared_->stopping) shared_->ioc.stop();
        }
    }

    std::shared_ptr<Shared> shared_;
    websocket::stream<Stream> ws_;
    Slot slot_;
    beast::flat_buffer in_;
    std::deque<Out> out_;
    std::size_t queued_ = 0;
    bool writing_ = false;
    std::optional<websocket::close_code> close_;
    bool close_sent_ = false;
    bool ended_ = false;
    bool accepted_ = false;  // the upgrade is done
    bool counted_ = false;   // in Shared::open_peers
};

// /ws/events: the session list, whenever it changes. Only the newest list is worth sending,
// so at most one waits behind the one being written.
class EventsSocket : public WsPeer {
public:
    using WsPeer::WsPeer;

    void publish(const std::string& document) {
        if (closing()) return;
        if (queued() == 0) send_text(document);
        else pending_ = document;
    }

private:
    void opened() override {
        shared().lister->subscribe(std::static_pointer_cast<EventsSocket>(shared_from_this()));
    }
    void message(bool, std::string_view) override {}  // the page sends nothing here
    void progress() override {
        if (queued() == 0 && pending_) {
            auto d = std::move(*pending_);
            pending_.reset();
            send_text(std::move(d));
        }
    }
    void ended() override {
        if (shared().lister) shared().lister->unsubscribe(this);
    }

    std::optional<std::string> pending_;
};

void Lister::subscribe(const std::shared_ptr<EventsSocket>& socket) {
    subscribers_.push_back(socket);
    if (!last_document_.empty()) socket->publish(last_document_);
    schedule();
}

void Lister::finish(const std::shared_ptr<Pending>& p, ListResult result) {
    if (p->done) return;
    p->done = true;
    p->link.close();
    beast::error_code ec;
    p->deadline.cancel();
    if (pending_ == p) pending_.reset();

    if (result.ok) {
        if (!last_error_.empty()) log("the daemon answers again");
        last_error_.clear();
        latest_ = result;
        latest_at_ = Clock::now();
        auto document = sessions_document(result.rows, result.role, names_, "sessions");
        if (document != last_document_) {
            last_document_ = std::move(document);
            for (const auto& w : subscribers_)
                if (auto s = w.lock()) s->publish(last_document_);
        }
    } else {
        if (result.error != last_error_) {
            last_error_ = result.error;
            log("cannot list the sessions: " + result.error);
        }
        // The page says so instead of showing an old list as if it were current.
        auto document = unavailable_message(result.error);
        if (document != last_document_) {
            last_document_ = std::move(document);
            for (const auto& w : subscribers_)
                if (auto s = w.lock()) s->publish(last_document_);
        }
    }
    auto waiters = std::move(waiters_);
    waiters_.clear();
    for (auto& cb : waiters) guarded([&] { cb(result); }, [] {});
    std::erase_if(subscribers_, [](const std::weak_ptr<EventsSocket>& w) { return w.expired(); });
    if (!subscribers_.empty()) schedule();
}

// /ws/terminal?id=ID: one daemon connection, attached as an observer (taking control with
// protocol version 5), relayed both ways.
class TerminalSocket : public WsPeer {
public:
    TerminalSocket(std::shared_ptr<Shared> shared, Stream&& stream, Slot slot, std::string id)
        : WsPeer(std::move(shared), std::move(stream), std::move(slot)),
          id_(std::move(id)),
          link_(this->shared().ioc),
          read_pause_(this->shared().ioc),
          screen_timer_(this->shared().ioc) {}

private:
    void opened() override {
        shared().enter_attaching([self = std::static_pointer_cast<TerminalSocket>(shared_from_this())] {
            self->attaching_ = true;
            guarded([&] { self->attach(); }, [&] { self->fail_internal(); });
            if (self->closing()) self->attached();  // failed at once, or the page left meanwhile
        });
    }

    // The ATTACH has been answered (or will not be): the next terminal may attach.
    void attached() {
        if (!attaching_) return;
        attaching_ = false;
        shared().leave_attaching();
    }

    void attach() {
        if (closing()) return;
        std::string why;
        if (!link_.connect(shared().config.daemon_socket, why)) {
            fail("daemon_unreachable", why, websocket::close_code::internal_error);
            return;
        }
        auto& c = link_.connection();
        c.use_version(5);
        protocol::AttachRequest request;
        request.id = id_;
        request.observe = true;
        const auto from = shared().lister ? shared().lister->replay_from(id_) : std::nullopt;
        // Without a recent list, the whole log (it is bounded by the daemon's ring).
        request.from = from ? protocol::LogPosition{protocol::LogPosition::Kind::Offset, *from}
                            : protocol::LogPosition{protocol::LogPosition::Kind::Start, 0};
        if (!c.attach(request, why)) {
            fail("bad_request", why, websocket::close_code::policy_error);
            return;
        }
        link_.flush(shared_from_this());
        read_daemon();
    }

    void read_daemon() {
        if (daemon_done_ || closing()) return;
        if (queued() >= kMaxQueuedPerSocket) {
            // Backpressure: the daemon keeps the output, then drops what this observer missed.
            paused_ = true;
            return;
        }
        if (gate_.mode() == FloodGate::Mode::Screen) {
            if (pausing_) return;
            pausing_ = true;
            read_pause_.expires_after(kScreenReadPause);
            read_pause_.async_wait([self = std::static_pointer_cast<TerminalSocket>(shared_from_this())](beast::error_code) {
                self->pausing_ = false;
                guarded([&] { self->wait_daemon(); }, [&] { self->fail_internal(); });
            });
            return;
        }
        wait_daemon();
    }

    void wait_daemon() {
        if (daemon_done_ || closing()) return;
        link_.wait_readable(shared_from_this(), [self = std::static_pointer_cast<TerminalSocket>(shared_from_this())](
                                                    beast::error_code ec) {
            if (ec) return;
            guarded([&] { self->on_daemon(); }, [&] { self->fail_internal(); });
        });
    }

    void on_daemon() {
        if (daemon_done_ || closing()) return;
        std::vector<client::Event> events;
        std::string why;
        if (!link_.connection().read_events(events, why)) {
            fail("daemon_failed", why, websocket::close_code::internal_error);
            return;
        }
        for (auto& e : events) {
            handle(e);
            if (daemon_done_) return;
        }
        read_daemon();
    }

    void handle(client::Event& e) {
        if (auto* out = std::get_if<client::Output>(&e)) {
            output(out->bytes);
        } else if (auto* a = std::get_if<client::Attached>(&e)) {
            stream_offset_ = a->reply.offset;
            replay_end_ = a->reply.end;
            AttachedView v;
            v.id = a->reply.id;
            v.offset = a->reply.offset;
            v.cols = a->reply.size.cols;
            v.rows = a->reply.size.rows;
            v.state = a->reply.state;
            v.may_control = a->reply.may_control;
            v.controller.held = a->reply.held;
            v.controller.uid = a->reply.controller_uid;
            v.controller.since_ms = a->reply.controller_since;
            may_control_ = v.may_control;
            controller_ = v.controller;
            attached();
            send_text(attached_message(v, false, shared().names));
        } else if (auto* d = std::get_if<client::Dropped>(&e)) {
            dropped(d->notice.offset, d->notice.lost);
        } else if (auto* x = std::get_if<client::Exit>(&e)) {
            daemon_done_ = true;
            link_.close();
            if (gate_.mode() == FloodGate::Mode::Screen) {
                // The page shows a screen of the flood: its last screen comes before the exit.
                exit_pending_ = x->status;
                asked_after_exit_ = false;
                ask_snapshot(/*now_even_if_early=*/true);
                return;
            }
            send_text(exit_message(x->status));
            close_after_sending(websocket::close_code::normal);
        } else if (auto* err = std::get_if<client::Error>(&e)) {
            const auto code = err->reply.code;
            const bool refusal = code == protocol::ErrorCode::NotAllowed || code == protocol::ErrorCode::NoSuchSession ||
                                 code == protocol::ErrorCode::Busy;
            fail(std::string(protocol::to_string(code)), err->reply.message,
                 refusal ? websocket::close_code::policy_error : websocket::close_code::internal_error);
        } else if (std::holds_alternative<client::Detached>(e) || std::holds_alternative<client::Closed>(e)) {
            fail("daemon_closed", "the daemon closed the connection", websocket::close_code::internal_error);
        } else if (auto* v = std::get_if<client::ProtocolViolation>(&e)) {
            fail("protocol_violation", v->message, websocket::close_code::internal_error);
        } else if (auto* c = std::get_if<client::ControllerChanged>(&e)) {
            controller_.held = c->notice.controller == protocol::ControllerNotice::Kind::Supervisor;
            controller_.uid = c->notice.uid;
            controller_.since_ms = c->notice.since;
            holds_ = controller_.held && c->notice.you;
            send_text(controller_message(controller_, holds_, shared().names));
        } else if (auto* r = std::get_if<client::Refused>(&e)) {
            send_text(refused_message(r->notice.code, r->notice.message));
        }
    }

    // ---- output, through the flood gate ----

    // OUTPUT from the daemon: contiguous from stream_offset_.
    void output(const std::vector<std::uint8_t>& bytes) {
        const auto at = stream_offset_;
        stream_offset_ += bytes.size();
        std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        if (gate_.mode() == FloodGate::Mode::Screen) return hold(at, data);
        if (resume_at_) {
            // After a final screen at resume_at_: what it already shows is not sent again.
            if (at + data.size() <= *resume_at_) return;
            if (at < *resume_at_) data.remove_prefix(*resume_at_ - at);
            resume_at_.reset();
        }
        forward(stream_offset_ - data.size(), data);
    }

    void forward(std::uint64_t at, std::string_view data) {
        if (data.empty()) return;
        // The replay of recent output on attach is the page's to pace (it asked for it).
        const bool replay = at + data.size() <= replay_end_;
        if (replay || !gate_enabled_ || gate_.pass(data.size(), Clock::now())) {
            send_binary(std::string(data));
            return;
        }
        // This terminal prints faster than a page should draw: screens from now on.
        flood_from_ = at;
        held_.assign(data);
        held_from_ = at;
        ask_snapshot(false);
    }

    // Output read during a flood: only the newest kHeldWhileFlooding bytes are kept.
    void hold(std::uint64_t at, std::string_view data) {
        if (held_from_ + held_.size() != at) {
            held_.clear();
            held_from_ = at;
        }
        held_.append(data);
        if (held_.size() > kHeldWhileFlooding) {
            const auto excess = held_.size() - kHeldWhileFlooding;
            held_.erase(0, excess);
            held_from_ += excess;
        }
    }

    void dropped(std::uint64_t offset, std::uint64_t lost) {
        if (gate_.mode() == FloodGate::Mode::Screen) {
            // Part of the flood the screens stand for; what is held before the gap is no use.
            stream_offset_ = offset;
            held_.clear();
            held_from_ = offset;
            return;
        }
        if (resume_at_) {
            const auto from = std::max(*resume_at_, stream_offset_);
            resume_at_.reset();
            stream_offset_ = offset;
            if (offset > from) send_text(dropped_message(offset, offset - from));
            return;
        }
        stream_offset_ = offset;
        send_text(dropped_message(offset, lost));
    }

    // A SNAPSHOT of this session on a connection of its own (it is the only request of one).
    struct SnapshotCall {
        explicit SnapshotCall(net::io_context& ioc) : link(ioc), deadline(ioc) {}
        DaemonLink link;
        net::steady_timer deadline;
        bool done = false;
    };

    void ask_snapshot(bool now_even_if_early) {
        if (closing() || snapshot_) return;
        const auto now = Clock::now();
        if (!now_even_if_early && !gate_.snapshot_due(now)) {
            if (gate_.mode() == FloodGate::Mode::Screen) arm_screen_timer();
            return;
        }
        gate_.snapshot_asked(now);
        if (exit_pending_) asked_after_exit_ = true;
        auto call = std::make_shared<SnapshotCall>(shared().ioc);
        snapshot_ = call;
        std::string why;
        if (!call->link.connect(shared().config.daemon_socket, why)) return snapshot_done(call, nullptr, why);
        protocol::SnapshotRequest request;
        request.id = id_;
        request.scrollback = kScreenScrollback;
        request.attributes = true;
        if (!call->link.connection().queue_snapshot(request, why)) return snapshot_done(call, nullptr, why);
        auto self = std::static_pointer_cast<TerminalSocket>(shared_from_this());
        call->link.flush(call);
        call->deadline.expires_after(kSnapshotTimeout);
        call->deadline.async_wait([self, call](beast::error_code ec) {
            if (ec || call->done) return;
            guarded([&] { self->snapshot_done(call, nullptr, "the daemon did not answer SNAPSHOT in time"); },
                    [&] { self->fail_internal(); });
        });
        read_snapshot(call);
    }

    void read_snapshot(const std::shared_ptr<SnapshotCall>& call) {
        auto self = std::static_pointer_cast<TerminalSocket>(shared_from_this());
        call->link.wait_readable(call, [self, call](beast::error_code ec) {
            if (ec || call->done) return;
            guarded([&] { self->on_snapshot(call); }, [&] { self->fail_internal(); });
        });
    }

    void on_snapshot(const std::shared_ptr<SnapshotCall>& call) {
        std::vector<client::Event> events;
        std::string why;
        if (!call->link.connection().read_events(events, why)) return snapshot_done(call, nullptr, why);
        for (auto& e : events) {
            if (auto* screen = std::get_if<client::Screen>(&e)) return snapshot_done(call, &screen->screen, {});
            if (auto* err = std::get_if<client::Error>(&e))
                return snapshot_done(call, nullptr, std::string(protocol::to_string(err->reply.code)) + ": " +
                                                        err->reply.message);
            if (auto* v = std::get_if<client::ProtocolViolation>(&e))
                return snapshot_done(call, nullptr, "protocol violation: " + v->message);
            if (std::holds_alternative<client::Closed>(e))
                return snapshot_done(call, nullptr, "the daemon closed the connection");
        }
        read_snapshot(call);
    }

    void snapshot_done(const std::shared_ptr<SnapshotCall>& call, const protocol::ScreenReply* screen,
                       const std::string& why) {
        if (call->done) return;
        call->done = true;
        call->link.close();
        call->deadline.cancel();
        if (snapshot_ == call) snapshot_.reset();
        if (closing()) return;
        if (!screen) {
            gate_.snapshot_failed();
            if (exit_pending_ || ++snapshot_failures_ >= kMaxSnapshotFailures) {
                // No screen to be had: the page is told what it missed, and gets bytes again.
                log("terminal " + id_ + ": no screen for the flood (" + why + "); streaming it");
                gate_.give_up(Clock::now());
                gate_enabled_ = false;
                if (stream_offset_ > flood_from_)
                    send_text(dropped_message(stream_offset_, stream_offset_ - flood_from_));
                held_.clear();
                if (exit_pending_) return finish_exit();
                return read_daemon();
            }
            return arm_screen_timer();
        }
        snapshot_failures_ = 0;
        bool final = gate_.snapshot_answered(screen->offset);
        if (exit_pending_) {
            // Only a screen asked after the EXIT shows all of the session's output.
            if (!asked_after_exit_) return ask_snapshot(true);
            gate_.give_up(Clock::now());
            final = true;
        }
        ScreenView v;
        v.offset = screen->offset;
        v.cols = screen->cols;
        v.rows = screen->rows;
        v.data = render_screen(*screen);
        v.streaming = final;
        v.skipped = screen->offset > flood_from_ ? screen->offset - flood_from_ : 0;
        send_text(screen_message(v));
        if (!final) return arm_screen_timer();
        if (exit_pending_) return finish_exit();
        // The stream resumes at the screen's offset: bytes already read past it go now, the
        // ones still to come are cut there.
        const auto s = screen->offset;
        if (s < stream_offset_) {
            std::string_view rest(held_);
            if (s >= held_from_) {
                rest.remove_prefix(std::min<std::uint64_t>(s - held_from_, rest.size()));
            } else if (held_from_ > s) {
                send_text(dropped_message(held_from_, held_from_ - s));
            }
            const std::string copy(rest);
            held_.clear();
            forward(stream_offset_ - copy.size(), copy);
        } else {
            resume_at_ = s;
            held_.clear();
        }
        read_daemon();
    }

    void finish_exit() {
        const auto status = *exit_pending_;
        exit_pending_.reset();
        send_text(exit_message(status));
        close_after_sending(websocket::close_code::normal);
    }

    void arm_screen_timer() {
        if (timer_armed_ || closing()) return;
        timer_armed_ = true;
        screen_timer_.expires_at(std::max(gate_.next_snapshot_at(), Clock::now()));
        screen_timer_.async_wait([self = std::static_pointer_cast<TerminalSocket>(shared_from_this())](beast::error_code ec) {
            self->timer_armed_ = false;
            if (ec) return;
            guarded([&] { self->ask_snapshot(false); }, [&] { self->fail_internal(); });
        });
    }

    void message(bool text, std::string_view data) override {
        if (!text) {
            send_text(refused_message("bad_message", "the console takes text messages only"));
            return;
        }
        const auto m = parse_page_message(data);
        auto& c = link_.connection();
        if (const auto* invalid = std::get_if<InvalidMessage>(&m)) {
            send_text(refused_message("bad_message", invalid->why));
        } else if (const auto* input = std::get_if<InputMessage>(&m)) {
            if (!holds_) {
                send_text(refused_message("read_only", "this terminal is read-only: take control first"));
            } else if (c.output_full()) {
                send_text(refused_message("busy", "the daemon is not taking input as fast as it comes"));
            } else {
                c.queue_input(std::string_view(input->data));
                link_.flush(shared_from_this());
            }
        } else if (std::holds_alternative<TakeMessage>(m)) {
            if (!may_control_) {
                send_text(refused_message("not_allowed", "only a supervisor or root may take control"));
                return;
            }
            c.queue_control(true);
            link_.flush(shared_from_this());
        } else if (std::holds_alternative<ReleaseMessage>(m)) {
            if (may_control_) {
                c.queue_control(false);
                link_.flush(shared_from_this());
            }
        } else if (const auto* resize = std::get_if<ResizeMessage>(&m)) {
            if (!holds_) {
                send_text(refused_message("read_only", "only the terminal that holds control resizes it"));
                return;
            }
            protocol::WindowSize size;
            size.cols = resize->cols;
            size.rows = resize->rows;
            c.queue_resize(size);
            link_.flush(shared_from_this());
        }
    }

    void progress() override {
        if (paused_ && queued() < kResumeBelow) {
            paused_ = false;
            read_daemon();
        }
    }

    void ended() override {
        // Closing the daemon connection hands control back to the agent.
        daemon_done_ = true;
        link_.close();
        attached();
        read_pause_.cancel();
        screen_timer_.cancel();
        if (auto call = snapshot_) {
            call->done = true;
            call->link.close();
            call->deadline.cancel();
            snapshot_.reset();
        }
    }

    void fail(const std::string& code, const std::string& text, websocket::close_code close) {
        daemon_done_ = true;
        link_.close();
        attached();
        send_text(error_message(code, text));
        close_after_sending(close);
    }

    std::string id_;
    DaemonLink link_;
    bool daemon_done_ = false;
    bool paused_ = false;
    bool may_control_ = false;
    bool holds_ = false;
    bool attaching_ = false;  // holds one of Shared::kMaxAttaching places
    ControllerView controller_;

    // The flood gate (FloodGate): bytes while the terminal prints at a pace a page can draw,
    // screens while it floods.
    FloodGate gate_;
    bool gate_enabled_ = true;             // false once snapshots failed: bytes only
    std::uint64_t stream_offset_ = 0;      // log offset of the next OUTPUT byte
    std::uint64_t replay_end_ = 0;         // ATTACHED's end: output before it is the replay
    std::uint64_t flood_from_ = 0;         // first byte of this flood the page was not sent
    std::optional<std::uint64_t> resume_at_;  // after a final screen: bytes before it are cut
    std::string held_;                     // output read during the flood (newest part)
    std::uint64_t held_from_ = 0;          // its offset
    std::shared_ptr<SnapshotCall> snapshot_;  // the SNAPSHOT in flight
    int snapshot_failures_ = 0;            // in a row
    std::optional<protocol::ExitStatus> exit_pending_;  // EXIT seen during a flood
    bool asked_after_exit_ = false;
    net::steady_timer read_pause_;
    net::steady_timer screen_timer_;
    bool pausing_ = false, timer_armed_ = false;
};

// ---- HTTP -------------------------------------------------------------------------------

template <class Body>
void add_common_headers(http::response<Body>& res, bool html) {
    res.set(http::field::cache_control, "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("Referrer-Policy", "no-referrer");
    res.set("X-Frame-Options", "DENY");
    if (html) res.set("Content-Security-Policy", std::string(kContentSecurityPolicy));
}

class HttpSession : public std::enable_shared_from_this<HttpSession> {
public:
    HttpSession(std::shared_ptr<Shared> shared, Protocol::socket socket, Slot slot)
        : shared_(std::move(shared)), stream_(std::move(socket)), slot_(std::move(slot)) {}

    void run() { read_request(); }

    // Too many connections: 503 and close, without reading the request.
    void refuse() {
        stream_.expires_after(std::chrono::seconds(5));
        send_text(http::status::service_unavailable, "ptyvisor web: too many connections\n", 11, /*close=*/true);
    }

private:
    void read_request() {
        parser_.emplace();
        parser_->header_limit(kMaxHeaderBytes);
        parser_->body_limit(0);  // every route is a GET: no request has a body
        stream_.expires_after(kIdleHttpTimeout);  // also closes an idle keep-alive connection
        http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                self->close();
                return;
            }
            guarded([&] { self->on_request(); }, [&] { self->close(); });
        });
    }

    void on_request() {
        const auto& req = parser_->get();
        keep_alive_ = req.keep_alive();
        RequestFacts facts;
        facts.method = std::string_view(req.method_string().data(), req.method_string().size());
        facts.target = std::string_view(req.target().data(), req.target().size());
        const auto header = [&](http::field f) {
            const auto v = req[f];
            return std::string_view(v.data(), v.size());
        };
        facts.host = header(http::field::host);
        facts.origin = header(http::field::origin);
        facts.cookie = header(http::field::cookie);
        facts.websocket_upgrade = websocket::is_upgrade(req);
        const Decision d = decide(facts, shared_->config.token, shared_->hosts);

        using K = Decision::Kind;
        switch (d.kind) {
        case K::BadHost:
            return send_text(http::status::forbidden, "ptyvisor web: this Host is not the console's\n");
        case K::NoToken:
            return send_text(http::status::forbidden, std::string(kNeedsToken));
        case K::BadOrigin:
            return send_text(http::status::forbidden, "ptyvisor web: a WebSocket needs an Origin of this Host\n");
        case K::MethodNotAllowed: {
            http::response<http::string_body> res{http::status::method_not_allowed, 11};
            res.set(http::field::allow, "GET");
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = "ptyvisor web: only GET\n";
            return send(std::move(res), false);
        }
        case K::NotFound:
            return send_text(http::status::not_found, "ptyvisor web: not found\n");
        case K::NotWebSocket:
            return send_text(http::status::upgrade_required, "ptyvisor web: this is a WebSocket\n");
        case K::BadRequest:
            return send_text(http::status::bad_request, "ptyvisor web: bad request\n");
        case K::SetCookieAndRedirect: {
            http::response<http::string_body> res{http::status::see_other, 11};
            res.set(http::field::location, "/");
            res.set(http::field::set_cookie, std::string(kTokenCookie) + "=" + shared_->config.token +
                                                 "; HttpOnly; SameSite=Strict; Path=/");
            return send(std::move(res), false);
        }
        case K::Serve:
            break;
        }
        serve(d.route);
    }

    void serve(const Route& route) {
        using R = Route::Kind;
        switch (route.kind) {
        case R::Index:
        case R::Asset: {
            const Asset* asset = find_asset(route.argument);
            if (!asset) return send_text(http::status::not_found, "ptyvisor web: not found\n");
            http::response<http::span_body<const char>> res{http::status::ok, 11};
            const auto type = content_type_for(asset->name);
            res.set(http::field::content_type, std::string(type));
            res.body() = boost::beast::span<const char>(asset->bytes.data(), asset->bytes.size());
            return send(std::move(res), false, type.starts_with("text/html"));
        }
        case R::Info:
            return shared_->lister->fetch([self = shared_from_this()](const ListResult& r) {
                guarded([&] { self->answer_info(r); }, [&] { self->close(); });
            });
        case R::Sessions:
            return shared_->lister->fetch([self = shared_from_this()](const ListResult& r) {
                guarded([&] { self->answer_sessions(r); }, [&] { self->close(); });
            });
        case R::Recording:
            return serve_recording(route.argument);
        case R::EventsSocket:
        case R::TerminalSocket:
            return upgrade(route);
        case R::NotFound:
            break;
        }
        send_text(http::status::not_found, "ptyvisor web: not found\n");
    }

    // The recording is streamed as the daemon sends it: CAST, then its bytes as OUTPUT, at most
    // kMaxRecordingChunk per connection. The first CAST's `size` fixes Content-Length (the file
    // grows while the session runs: what came later is for the next request); further chunks
    // are asked for from where the last ended. One OUTPUT at a time is held, and the daemon is
    // read again only once it is written.
    void serve_recording(const std::string& id) {
        recording_id_ = id;
        recording_offset_ = 0;
        recording_left_ = 0;
        recording_header_ = false;
        start_chunk();
    }

    void start_chunk() {
        auto link = std::make_shared<DaemonLink>(shared_->ioc);
        std::string why;
        if (!link->connect(shared_->config.daemon_socket, why)) return recording_failed(why);
        auto& c = link->connection();
        c.use_version(5);
        protocol::RecordingRequest request;
        request.id = recording_id_;
        request.offset = recording_offset_;
        request.max_bytes = protocol::kMaxRecordingChunk;
        if (!c.queue_recording(request, why)) return recording_failed(why);
        recording_ = link;
        chunk_done_ = false;
        chunk_bytes_ = 0;
        link->flush(shared_from_this());
        read_recording();
    }

    void read_recording() {
        recording_->wait_readable(shared_from_this(), [self = shared_from_this()](beast::error_code ec) {
            if (ec) return;
            guarded([&] { self->on_recording(); }, [&] { self->close(); });
        });
    }

    // Before the header: an answer of its own; after it: the body is cut, so the connection
    // is closed (the browser then knows the file is incomplete).
    void recording_failed(const std::string& why, http::status status = http::status::bad_gateway) {
        recording_.reset();
        body_.clear();
        if (recording_header_) return close();
        send_json(status, error_json(why));
    }

    void on_recording() {
        std::vector<client::Event> events;
        std::string why;
        if (!recording_->connection().read_events(events, why)) return recording_failed(why);
        for (auto& e : events) {
            if (auto* cast = std::get_if<client::Cast>(&e)) {
                if (!recording_header_) {
                    recording_header_ = true;
                    recording_left_ = cast->reply.size > cast->reply.offset ? cast->reply.size - cast->reply.offset : 0;
                    http::response<http::empty_body> res{http::status::ok, 11};
                    res.set(http::field::content_type, "application/x-asciicast");
                    res.content_length(recording_left_);
                    add_common_headers(res, false);
                    res.keep_alive(keep_alive_);
                    std::ostringstream header;
                    header << res.base();
                    body_.push_back(header.str());
                }
            } else if (auto* out = std::get_if<client::Output>(&e)) {
                const auto n = std::min<std::uint64_t>(out->bytes.size(), recording_left_);
                recording_left_ -= n;
                recording_offset_ += out->bytes.size();
                chunk_bytes_ += out->bytes.size();
                if (n > 0) body_.emplace_back(out->bytes.begin(), out->bytes.begin() + static_cast<std::ptrdiff_t>(n));
            } else if (auto* err = std::get_if<client::Error>(&e)) {
                const auto code = err->reply.code;
                return recording_failed(err->reply.message, code == protocol::ErrorCode::NoSuchSession ? http::status::not_found
                                                            : code == protocol::ErrorCode::NotAllowed ? http::status::forbidden
                                                                                                      : http::status::bad_gateway);
            } else if (client::is_final(e)) {
                chunk_done_ = true;
            }
        }
        if (chunk_done_ && !recording_header_) return recording_failed("the daemon sent no recording");
        pump_recording();
    }

    void pump_recording() {
        if (recording_writing_) return;
        if (!body_.empty()) {
            recording_writing_ = true;
            stream_.expires_after(kIdleHttpTimeout);
            net::async_write(stream_, net::buffer(body_.front()),
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 self->recording_writing_ = false;
                                 if (ec) return self->close();
                                 self->body_.pop_front();
                                 guarded([&] { self->pump_recording(); }, [&] { self->close(); });
                             });
            return;
        }
        if (recording_header_ && recording_left_ == 0) {
            recording_.reset();
            if (!keep_alive_) return close();
            return read_request();
        }
        if (!chunk_done_) return read_recording();
        // This chunk is over and the body is not: the next one, unless this one brought
        // nothing (the file was cut), which would loop.
        if (chunk_bytes_ == 0) return recording_failed("the recording ended short");
        start_chunk();
    }

    void answer_info(const ListResult& r) {
        if (!r.ok) return send_json(http::status::bad_gateway, error_json(r.error));
        send_json(http::status::ok, info_document(shared_->config.user, shared_->config.uid, r.role,
                                                  shared_->config.version));
    }

    void answer_sessions(const ListResult& r) {
        if (!r.ok) return send_json(http::status::bad_gateway, error_json(r.error));
        send_json(http::status::ok, sessions_document(r.rows, r.role, shared_->names));
    }

    static std::string error_json(const std::string& why) {
        return nlohmann::json{{"error", "the daemon did not answer: " + why}}.dump(
            -1, ' ', false, nlohmann::json::error_handler_t::replace);
    }

    void upgrade(const Route& route) {
        stream_.expires_never();  // the WebSocket has its own timeouts
        std::shared_ptr<WsPeer> peer;
        if (route.kind == Route::Kind::EventsSocket)
            peer = std::make_shared<EventsSocket>(shared_, std::move(stream_), std::move(slot_));
        else
            peer = std::make_shared<TerminalSocket>(shared_, std::move(stream_), std::move(slot_), route.argument);
        peer->run(parser_->release());
    }

    void send_text(http::status status, std::string body, unsigned version = 11, bool close_after = false) {
        http::response<http::string_body> res{status, version};
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        res.body() = std::move(body);
        send(std::move(res), close_after);
    }

    void send_json(http::status status, std::string body) {
        http::response<http::string_body> res{status, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = std::move(body);
        send(std::move(res), false);
    }

    template <class Body>
    void send(http::response<Body>&& res, bool close_after, bool html = false) {
        add_common_headers(res, html);
        res.keep_alive(keep_alive_ && !close_after);
        res.prepare_payload();
        auto sp = std::make_shared<http::response<Body>>(std::move(res));
        stream_.expires_after(kIdleHttpTimeout);
        http::async_write(stream_, *sp, [self = shared_from_this(), sp](beast::error_code ec, std::size_t) {
            if (ec || !sp->keep_alive()) {
                self->close();
                return;
            }
            guarded([&] { self->read_request(); }, [&] { self->close(); });
        });
    }

    void close() {
        beast::error_code ec;
        stream_.socket().shutdown(Protocol::socket::shutdown_send, ec);
        stream_.close();
    }

    std::shared_ptr<Shared> shared_;
    Stream stream_;
    Slot slot_;
    beast::flat_buffer buffer_{kMaxHeaderBytes};
    std::optional<http::request_parser<http::empty_body>> parser_;
    bool keep_alive_ = false;
    // GET /api/sessions/ID/recording, while it is streamed.
    std::shared_ptr<DaemonLink> recording_;
    std::string recording_id_;
    std::deque<std::string> body_;
    std::uint64_t recording_offset_ = 0;   // of the next byte to ask for
    std::uint64_t recording_left_ = 0;     // bytes of the body still to send
    std::uint64_t chunk_bytes_ = 0;        // bytes the current chunk brought
    bool recording_header_ = false, chunk_done_ = false, recording_writing_ = false;
};

// ---- the listener -----------------------------------------------------------------------

class Server : public std::enable_shared_from_this<Server> {
public:
    Server(net::io_context& ioc, std::shared_ptr<Shared> shared)
        : ioc_(ioc), shared_(std::move(shared)), acceptor_(ioc), signals_(ioc, SIGINT, SIGTERM) {}

    ~Server() { remove_unix_socket(); }

    // Binds and listens; sets `url` to the first line of stdout.
    bool listen(std::string& url, std::string& why) {
        auto& config = shared_->config;
        beast::error_code ec;
        if (config.unix_socket) {
            if (!prepare_unix_path(config.unix_path, why)) return false;
            const Protocol::endpoint endpoint{net::local::stream_protocol::endpoint(config.unix_path)};
            acceptor_.open(endpoint.protocol(), ec);
            if (!ec) {
                // 0600: the person's; a proxy gets in through a group the administrator adds.
                const mode_t old = ::umask(0177);
                acceptor_.bind(endpoint, ec);
                ::umask(old);
            }
            if (!ec) {
                struct stat st {};
                if (::lstat(config.unix_path.c_str(), &st) == 0) {
                    unix_created_ = true;
                    unix_inode_ = st.st_ino;
                }
            }
            if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
            if (ec) {
                why = "cannot listen on " + config.unix_path + ": " + ec.message();
                return false;
            }
            url = "http://localhost/?token=" + config.token;
            log("listening on " + config.unix_path);
            return true;
        }
        const std::string host = config.listen_host == "localhost" ? "127.0.0.1" : config.listen_host;
        const auto address = net::ip::make_address(host, ec);
        if (ec) {
            why = "--listen: " + config.listen_host + " is not a numeric address (nor localhost)";
            return false;
        }
        const Protocol::endpoint endpoint{net::ip::tcp::endpoint(address, config.port)};
        acceptor_.open(endpoint.protocol(), ec);
        if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
        if (!ec) acceptor_.bind(endpoint, ec);
        if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
        if (ec) {
            why = "cannot listen on " + config.listen_host + ":" + std::to_string(config.port) + ": " + ec.message();
            return false;
        }
        sockaddr_storage bound{};
        socklen_t length = sizeof bound;
        if (::getsockname(acceptor_.native_handle(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
            why = std::string("getsockname: ") + std::strerror(errno);
            return false;
        }
        config.port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                                  : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
        shared_->hosts.port = config.port;
        if (!address.is_loopback())
            log("warning: " + config.listen_host + " is not a loopback address: the console is reachable from the network");
        const std::string shown = address.is_v6() ? "[" + host + "]" : host;
        url = "http://" + shown + ":" + std::to_string(config.port) + "/?token=" + config.token;
        return true;
    }

    void start() {
        signals_.async_wait([self = shared_from_this()](beast::error_code ec, int) {
            if (!ec) self->stop();
        });
        accept();
    }

private:
    bool prepare_unix_path(const std::string& path, std::string& why) {
        if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path)) {
            why = "--unix: the path is empty or too long";
            return false;
        }
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) {
            if (errno == ENOENT) return true;
            why = "--unix: cannot stat " + path + ": " + std::strerror(errno);
            return false;
        }
        if (!S_ISSOCK(st.st_mode)) {
            why = "--unix: " + path + " exists and is not a socket; refusing to replace it";
            return false;
        }
        // A socket left by a console that is gone is replaced; a live one is not.
        UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, path.data(), path.size());
        if (probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
            why = "--unix: something already listens on " + path;
            return false;
        }
        if (::unlink(path.c_str()) != 0) {
            why = "--unix: cannot remove the stale socket " + path + ": " + std::strerror(errno);
            return false;
        }
        return true;
    }

    void remove_unix_socket() {
        if (!unix_created_) return;
        unix_created_ = false;
        struct stat st {};
        // Only ours: not a socket another console put there after us.
        if (::lstat(shared_->config.unix_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == unix_inode_)
            ::unlink(shared_->config.unix_path.c_str());
    }

    void accept() {
        acceptor_.async_accept([self = shared_from_this()](beast::error_code ec, Protocol::socket socket) {
            if (ec == net::error::operation_aborted || !self->acceptor_.is_open()) return;
            if (!ec) guarded([&] { self->admit(std::move(socket)); }, [] {});
            else log("accept: " + ec.message());
            // EMFILE and the like: the loop goes on; the next connection may fit.
            self->accept();
        });
    }

    void admit(Protocol::socket socket) {
        if (!shared_->config.unix_socket) {
            const int one = 1;
            ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        if (shared_->connections >= kMaxConnections) {
            // Its place is not counted: it is only told to come back later.
            std::make_shared<HttpSession>(shared_, std::move(socket), Slot())->refuse();
            return;
        }
        std::make_shared<HttpSession>(shared_, std::move(socket), Slot(shared_))->run();
    }

    // Stops accepting, closes every WebSocket with 1001 and exits once they are closed, or
    // after kStopGrace whatever the pages do. Plain HTTP connections are simply dropped.
    void stop() {
        if (shared_->stopping) return;
        log("stopping");
        shared_->stopping = true;
        beast::error_code ec;
        acceptor_.close(ec);
        remove_unix_socket();
        const auto peers = shared_->peers;
        for (const auto& w : peers)
            if (auto p = w.lock()) guarded([&] { p->going_away(); }, [] {});
        if (shared_->open_peers == 0) return ioc_.stop();
        grace_.expires_after(kStopGrace);
        grace_.async_wait([self = shared_from_this()](beast::error_code) { self->ioc_.stop(); });
    }

    net::io_context& ioc_;
    std::shared_ptr<Shared> shared_;
    net::basic_socket_acceptor<Protocol> acceptor_;
    net::signal_set signals_;
    net::steady_timer grace_{ioc_};
    bool unix_created_ = false;
    ino_t unix_inode_ = 0;
};

}  // namespace

int serve(const ServerConfig& config) {
    // A page that goes away mid-write must not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    net::io_context ioc{1};
    std::shared_ptr<Server> server;
    try {
        auto shared = std::make_shared<Shared>(ioc, config);
        shared->lister = std::make_shared<Lister>(ioc, config.daemon_socket, config.uid, shared->names);
        server = std::make_shared<Server>(ioc, shared);
        std::string url, why;
        if (!server->listen(url, why)) {
            log(why);
            return 1;
        }
        server->start();
        std::printf("%s\n", url.c_str());
        std::fflush(stdout);
    } catch (const std::exception& e) {
        log(std::string("cannot start: ") + e.what());
        return 1;
    }
    for (;;) {
        try {
            ioc.run();
            break;
        } catch (const std::exception& e) {
            // guarded() should have caught it; the loop goes on for the other connections.
            log(std::string("internal error: ") + e.what());
        }
        if (ioc.stopped()) break;
    }
    server.reset();
    return 0;
}

}  // namespace ptyvisor::web
