// sessionbench: the performance goals of persistent sessions (protocol version 2,
// docs/protocol.md section 9), measured over the wire protocol directly (src/protocol's
// frames and payloads, no client library in the way), as the agent's account.
//
// Modes (each prints exactly one JSON object on stdout; times are steady_clock):
//   replay [--count N] [--warmup W] [--lines M] [--expect-length L] [--kinds K,...]
//       Starts one detached session, `sh -c 'seq 1 M; exec sleep 3600'`, waits (WAIT, text)
//       for its last line, so that its log is full and wrapped once M is large enough, then
//       N + W times each of three requests, in an order rotated at every iteration:
//         observer    ATTACH {from: "start", role: "observer"}
//         controller  ATTACH {from: "start", role: "controller"} (then DETACH, untimed)
//         read        READ {from: "start"} (the one-shot request, for comparison)
//       (--kinds: a subset of these, comma-separated)
//       Each is timed from just before the request's send() (on a connection already made)
//       to the arrival of the last byte of the log. Every reply must hold exactly
//       end - start bytes, equal to the last end - start bytes of what `seq` printed (with
//       the terminal's \r\n), and with --expect-length, end - start must be L (the log is
//       full). Then KILL ends the session.
//   observers [--observers K] [--bytes N]
//       Starts one bound session, `sh -c 'stty -echo; printf R; read x; exec head -c N
//       /dev/zero'`, attaches K observers (from "start"), waits for the R, then sends the
//       newline and times, in one thread per reader, the arrival of every reader's last byte.
//       The controller (a bound session waits for it) must get all N + 1 bytes; each
//       observer must account for all N + 1: bytes received plus the bytes DROPPED notices
//       say it lost. Every byte received is checked (R, then zeros).
//   idle-start [--sessions K] [--window W] -- CMD...
//       Starts K detached sessions of CMD (at most W START requests in flight) and prints
//       their ids; the sessions go on after this process exits.
//   list [--count N] [--warmup W] [--expect K]
//       N + W LIST requests, one at a time, each timed from just before its send() to the
//       arrival of the whole SESSIONS frame (decoded afterwards, untimed).
//   kill [--window W]
//       Ends the sessions whose ids are on stdin, one per line (KILL, signal 0: as STOP), at
//       most W at a time, each waited for until KILLED.
//
// Every wait is bounded (--timeout, seconds): a stuck daemon is an error, not a hang.
// Nothing is retried: a wrong byte count or content fails the run (exit status 1).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"

extern char** environ;

namespace {

namespace pr = ptyvisor::protocol;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string mode;
    std::string socket;
    int count = 0;
    int warmup = -1;
    int window = 4;
    int observers = 8;
    long lines = 400000;
    std::uint64_t expect_length = 0;
    std::uint64_t bytes = 256ull << 20;
    int sessions = 1000;
    long expect = -1;
    std::string kinds = "observer,controller,read";
    double timeout = 60;
    std::vector<std::string> argv;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "sessionbench: %s\n"
                 "usage: sessionbench replay|observers|idle-start|list|kill --socket PATH [--timeout S]\n"
                 "       replay     [--count N] [--warmup W] [--lines M] [--expect-length L] [--kinds K,...]\n"
                 "       observers  [--observers K] [--bytes N]\n"
                 "       idle-start [--sessions K] [--window W] -- CMD [ARGS...]\n"
                 "       list       [--count N] [--warmup W] [--expect K]\n"
                 "       kill       [--window W]   (ids on stdin, one per line)\n",
                 why.c_str());
    std::exit(2);
}

double us_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

// Nearest-rank percentiles of one run's samples.
struct Stats {
    std::vector<double> v;
    [[nodiscard]] double pct(double p) const {
        if (v.empty()) return NAN;
        auto s = v;
        std::sort(s.begin(), s.end());
        const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(s.size())));
        return s[std::min(s.size() - 1, k == 0 ? 0 : k - 1)];
    }
    [[nodiscard]] std::string json() const {
        char buf[512];
        if (v.empty()) return "{\"n\":0}";
        double sum = 0;
        for (double x : v) sum += x;
        std::snprintf(buf, sizeof buf,
                      "{\"n\":%zu,\"min\":%.1f,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"max\":%.1f,\"mean\":%.1f}",
                      v.size(), pct(0.0001), pct(50), pct(90), pct(99), pct(100), sum / static_cast<double>(v.size()));
        return buf;
    }
};

// One connection to the daemon: blocking sends, reads bounded by a deadline, frames parsed
// in place (an OUTPUT payload is a view into the read buffer, valid until the next next()).
class Conn {
public:
    struct Frame {
        pr::FrameType type{};
        std::span<const std::uint8_t> payload;
        [[nodiscard]] std::string_view text() const {
            return {reinterpret_cast<const char*>(payload.data()), payload.size()};
        }
    };

    Conn(const std::string& path, double timeout_s) : timeout_(timeout_s) {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        if (path.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long");
        std::memcpy(addr.sun_path, path.data(), path.size());
        fd_ = ptyvisor::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd_ || ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0)
            throw std::runtime_error("connect " + path + ": " + std::strerror(errno));
        buf_.resize(kReadSize + pr::kHeaderSize + pr::kMaxPayloadSize);
    }

    [[nodiscard]] int fd() const { return fd_.get(); }

    void send(pr::FrameType type, std::string_view payload) {
        const auto frame = pr::encode_frame(type, payload);
        std::span<const std::uint8_t> left(frame);
        while (!left.empty()) {
            const ssize_t n = ::send(fd_.get(), left.data(), left.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw std::runtime_error(std::string("send ") + std::string(pr::to_string(type)) + ": " + std::strerror(errno));
            left = left.subspan(static_cast<std::size_t>(n));
        }
    }

    // START, with the working directory's descriptor attached.
    void send_start(const std::vector<std::string>& argv, bool detach) {
        ptyvisor::UniqueFd dir(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct stat st {};
        if (!dir || ::fstat(dir.get(), &st) < 0) throw std::runtime_error("cannot open the working directory");
        pr::StartRequest req;
        req.argv = argv;
        for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
        const char* term = std::getenv("TERM");
        req.term = term ? term : "dumb";
        req.size = {24, 80};
        req.cwd_dev = st.st_dev;
        req.cwd_ino = st.st_ino;
        req.detach = detach;
        const auto frame = pr::encode_frame(pr::FrameType::Start, pr::encode(req));
        if (const int e = pr::send_with_fd(fd_.get(), frame, dir.get()); e != 0)
            throw std::runtime_error(std::string("send START: ") + std::strerror(-e));
    }

    // The next frame, or false once the daemon has closed the connection. ERROR throws.
    bool next(Frame& out) {
        const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
        for (;;) {
            const std::size_t have = end_ - begin_;
            if (have >= pr::kHeaderSize) {
                const auto h = pr::parse_header(std::span<const std::uint8_t, pr::kHeaderSize>(buf_.data() + begin_, pr::kHeaderSize));
                if (!h.header) throw std::runtime_error("bad frame header from the daemon");
                const std::size_t total = pr::kHeaderSize + h.header->length;
                if (have >= total) {
                    out.type = h.header->type;
                    out.payload = std::span<const std::uint8_t>(buf_.data() + begin_ + pr::kHeaderSize, h.header->length);
                    begin_ += total;
                    if (out.type == pr::FrameType::Error) {
                        const auto err = pr::decode_error(out.text());
                        throw std::runtime_error("ptyvisord refused: " +
                                                 (err ? std::string(pr::to_string(err.value->code)) + ": " + err.value->message
                                                      : std::string(out.text())));
                    }
                    return true;
                }
            }
            if (eof_) {
                if (have != 0) throw std::runtime_error("the daemon closed the connection inside a frame");
                return false;
            }
            // Keep the unfinished frame, at the front, and read more behind it.
            if (begin_ > 0) {
                std::memmove(buf_.data(), buf_.data() + begin_, have);
                begin_ = 0;
                end_ = have;
            }
            for (;;) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
                if (left <= 0) throw std::runtime_error("no frame from the daemon within the timeout");
                pollfd p{fd_.get(), POLLIN, 0};
                const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
                if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
                if (r > 0) break;
            }
            const ssize_t n = ::read(fd_.get(), buf_.data() + end_, buf_.size() - end_);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n < 0 && errno == ECONNRESET) {
                eof_ = true;
                continue;
            }
            if (n < 0) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
            if (n == 0) eof_ = true;
            end_ += static_cast<std::size_t>(n);
        }
    }

    // The next frame, which must be of `type`.
    Frame expect(pr::FrameType type) {
        Frame f;
        if (!next(f)) throw std::runtime_error("the daemon closed the connection before " + std::string(pr::to_string(type)));
        if (f.type != type)
            throw std::runtime_error("expected " + std::string(pr::to_string(type)) + ", got " + std::string(pr::to_string(f.type)));
        return f;
    }

private:
    static constexpr std::size_t kReadSize = 1024 * 1024;
    ptyvisor::UniqueFd fd_;
    double timeout_;
    std::vector<std::uint8_t> buf_;
    std::size_t begin_ = 0, end_ = 0;
    bool eof_ = false;
};

template <class T>
T decoded(pr::Decoded<T> d, const char* what) {
    if (!d) throw std::runtime_error(std::string("cannot decode ") + what + ": " + d.error);
    return std::move(*d.value);
}

// Starts a detached session and returns its id; the connection is closed at once (a
// detached session goes on).
std::string start_detached(const Options& o, const std::vector<std::string>& argv) {
    Conn c(o.socket, o.timeout);
    c.send_start(argv, /*detach=*/true);
    const auto f = c.expect(pr::FrameType::Started);
    auto started = decoded(pr::decode_started(f.text()), "STARTED");
    if (!pr::is_session_id(started.id)) throw std::runtime_error("STARTED without a session id (a version 1 daemon?)");
    return started.id;
}

void kill_session(const Options& o, const std::string& id) {
    Conn c(o.socket, o.timeout);
    c.send(pr::FrameType::Kill, pr::encode(pr::KillRequest{id, 0}));
    c.expect(pr::FrameType::Killed);
}

// ---- replay ------------------------------------------------------------------------------

std::string seq_output(long lines) {
    std::string s;
    for (long i = 1; i <= lines; ++i) {
        s += std::to_string(i);
        s += "\r\n";  // the terminal's ONLCR
    }
    return s;
}

struct ReplayResult {
    std::uint64_t start = 0, end = 0, bytes = 0;
    double us = 0;
};

// Reads `want` bytes of OUTPUT into `into`, from `c`; the time of the read that completed them.
Clock::time_point read_output(Conn& c, std::uint64_t want, std::vector<std::uint8_t>& into) {
    into.clear();
    Conn::Frame f;
    while (into.size() < want) {
        if (!c.next(f)) throw std::runtime_error("closed after " + std::to_string(into.size()) + " of " + std::to_string(want) + " bytes");
        if (f.type == pr::FrameType::Dropped) throw std::runtime_error("DROPPED during a replay: the log moved");
        if (f.type != pr::FrameType::Output)
            throw std::runtime_error("unexpected " + std::string(pr::to_string(f.type)) + " during a replay");
        into.insert(into.end(), f.payload.begin(), f.payload.end());
    }
    const auto t = Clock::now();
    if (into.size() != want)
        throw std::runtime_error(std::to_string(into.size()) + " bytes arrived, " + std::to_string(want) + " expected");
    return t;
}

ReplayResult replay_once(const Options& o, const std::string& id, const std::string& kind, std::vector<std::uint8_t>& got) {
    Conn c(o.socket, o.timeout);
    ReplayResult r;
    Clock::time_point t0, t1;
    if (kind == "read") {
        pr::ReadRequest req{id, {pr::LogPosition::Kind::Start, 0}, pr::kMaxReadBytes};
        const auto payload = pr::encode(req);
        t0 = Clock::now();
        c.send(pr::FrameType::Read, payload);
        const auto log = decoded(pr::decode_log(c.expect(pr::FrameType::Log).text()), "LOG");
        if (log.offset != log.start || log.offset + log.length != log.end)
            throw std::runtime_error("LOG does not cover the whole log: start " + std::to_string(log.start) + " offset " +
                                     std::to_string(log.offset) + " length " + std::to_string(log.length) + " end " +
                                     std::to_string(log.end));
        t1 = read_output(c, log.length, got);
        r.start = log.start;
        r.end = log.end;
        Conn::Frame f;
        if (c.next(f)) throw std::runtime_error("a frame after the LOG's bytes: " + std::string(pr::to_string(f.type)));
    } else {
        pr::AttachRequest req{id, {pr::LogPosition::Kind::Start, 0}, kind == "observer", false};
        const auto payload = pr::encode(req);
        t0 = Clock::now();
        c.send(pr::FrameType::Attach, payload);
        const auto a = decoded(pr::decode_attached(c.expect(pr::FrameType::Attached).text()), "ATTACHED");
        if (a.offset != a.start) throw std::runtime_error("ATTACHED offset " + std::to_string(a.offset) + " is not start " + std::to_string(a.start));
        t1 = read_output(c, a.end - a.start, got);
        r.start = a.start;
        r.end = a.end;
        if (kind == "controller") {
            // Leave cleanly, so that the next controller is not refused as busy.
            c.send(pr::FrameType::Detach, "");
            const auto d = decoded(pr::decode_detached(c.expect(pr::FrameType::Detached).text()), "DETACHED");
            if (d.offset != a.end) throw std::runtime_error("DETACHED at " + std::to_string(d.offset) + ", expected " + std::to_string(a.end));
        }
    }
    r.bytes = got.size();
    r.us = us_between(t0, t1);
    return r;
}

int run_replay(const Options& o) {
    const int count = o.count > 0 ? o.count : 200;
    const int warmup = o.warmup >= 0 ? o.warmup : 10;
    const std::string expected = seq_output(o.lines);
    const std::string script = "seq 1 " + std::to_string(o.lines) + "; exec sleep 3600";
    const std::string id = start_detached(o, {"sh", "-c", script});
    try {
        {
            // Until the last line is in the log (WAIT is event-driven on the daemon's side).
            Conn c(o.socket, o.timeout);
            pr::WaitRequest w;
            w.id = id;
            w.what = pr::WaitRequest::For::Text;
            w.pattern = "\\n" + std::to_string(o.lines) + "\\r\\n";
            w.from = {pr::LogPosition::Kind::Start, 0};
            w.timeout_ms = static_cast<std::uint64_t>(o.timeout * 1000);
            c.send(pr::FrameType::Wait, pr::encode(w));
            const auto r = decoded(pr::decode_waited(c.expect(pr::FrameType::Waited).text()), "WAITED");
            if (!r.matched) throw std::runtime_error("the session's last line never came (WAITED reason " + r.reason + ")");
            if (r.offset != expected.size())
                throw std::runtime_error("the log ends at " + std::to_string(r.offset) + ", `seq` prints " + std::to_string(expected.size()));
        }
        std::vector<std::string> kinds;
        for (std::size_t at = 0; at <= o.kinds.size();) {
            const auto comma = std::min(o.kinds.find(',', at), o.kinds.size());
            const auto kind = o.kinds.substr(at, comma - at);
            if (kind != "observer" && kind != "controller" && kind != "read") usage("--kinds: unknown kind " + kind);
            kinds.push_back(kind);
            at = comma + 1;
        }
        std::vector<Stats> stats(kinds.size());
        std::vector<std::uint8_t> got;
        got.reserve(expected.size());
        std::uint64_t start = 0, end = 0;
        for (int i = 0; i < warmup + count; ++i) {
            for (std::size_t k = 0; k < kinds.size(); ++k) {
                const std::size_t which = (k + static_cast<std::size_t>(i)) % kinds.size();
                const auto r = replay_once(o, id, kinds[which], got);
                if (r.end != expected.size())
                    throw std::runtime_error(kinds[which] + ": the log's end moved to " + std::to_string(r.end));
                if (o.expect_length && r.end - r.start != o.expect_length)
                    throw std::runtime_error(kinds[which] + ": the log holds " + std::to_string(r.end - r.start) + " bytes, not " +
                                             std::to_string(o.expect_length) + " (not full?)");
                if (std::memcmp(got.data(), expected.data() + r.start, got.size()) != 0)
                    throw std::runtime_error(kinds[which] + ": the replayed bytes differ from what `seq` printed");
                start = r.start;
                end = r.end;
                if (i >= warmup) stats[which].v.push_back(r.us);
            }
        }
        kill_session(o, id);
        std::printf("{\"lines\":%ld,\"start\":%llu,\"end\":%llu,\"length\":%llu,\"count\":%d,\"warmup\":%d,\"us\":{", o.lines,
                    static_cast<unsigned long long>(start), static_cast<unsigned long long>(end),
                    static_cast<unsigned long long>(end - start), count, warmup);
        for (std::size_t k = 0; k < kinds.size(); ++k)
            std::printf("%s\"%s\":%s", k ? "," : "", kinds[k].c_str(), stats[k].json().c_str());
        std::printf("}}\n");
        return 0;
    } catch (...) {
        try {
            kill_session(o, id);
        } catch (...) {
        }
        throw;
    }
}

// ---- observers ---------------------------------------------------------------------------

struct Reader {
    std::unique_ptr<Conn> conn;
    bool controller = false;
    std::uint64_t first_offset = 0;  // ATTACHED's offset (0 for the controller: STARTED)
    // Filled by the thread.
    std::uint64_t received = 0, lost = 0, dropped_notices = 0, bad_bytes = 0;
    bool exited = false;
    Clock::time_point last;
    std::string error;
};

// Reads until EXIT and the close, checking each byte: offset 0 is 'R', every later one 0.
void read_all(Reader& r, std::uint64_t total) {
    try {
        std::uint64_t pos = r.first_offset;
        Conn::Frame f;
        while (r.conn->next(f)) {
            switch (f.type) {
                case pr::FrameType::Output: {
                    auto p = f.payload;
                    if (pos == 0 && !p.empty()) {
                        if (p[0] != 'R') ++r.bad_bytes;
                        p = p.subspan(1);
                        ++pos;
                        ++r.received;
                    }
                    std::uint8_t any = 0;
                    for (const auto b : p) any |= b;
                    if (any) {
                        for (const auto b : p) r.bad_bytes += b != 0;
                    }
                    pos += p.size();
                    r.received += p.size();
                    r.last = Clock::now();
                    break;
                }
                case pr::FrameType::Dropped: {
                    const auto d = decoded(pr::decode_dropped(f.text()), "DROPPED");
                    if (pos + d.lost != d.offset)
                        throw std::runtime_error("DROPPED {offset " + std::to_string(d.offset) + ", lost " + std::to_string(d.lost) +
                                                 "} at position " + std::to_string(pos));
                    r.lost += d.lost;
                    ++r.dropped_notices;
                    pos = d.offset;
                    break;
                }
                case pr::FrameType::Exit: r.exited = true; break;
                default: throw std::runtime_error("unexpected " + std::string(pr::to_string(f.type)));
            }
        }
        if (!r.exited) throw std::runtime_error("closed without EXIT");
        if (pos != total) throw std::runtime_error("ended at offset " + std::to_string(pos) + ", expected " + std::to_string(total));
    } catch (const std::exception& e) {
        r.error = e.what();
    }
}

int run_observers(const Options& o) {
    const std::uint64_t n = o.bytes;
    const std::uint64_t total = n + 1;  // the R, then n zeros
    std::vector<Reader> readers(static_cast<std::size_t>(o.observers) + 1);
    Reader& ctl = readers[0];
    ctl.controller = true;
    ctl.conn = std::make_unique<Conn>(o.socket, o.timeout);
    // stty -echo first: the newline that starts the output must not be echoed.
    ctl.conn->send_start({"sh", "-c", "stty -echo; printf R; read x; exec head -c " + std::to_string(n) + " /dev/zero"}, false);
    const auto started = decoded(pr::decode_started(ctl.conn->expect(pr::FrameType::Started).text()), "STARTED");
    for (std::size_t i = 1; i < readers.size(); ++i) {
        readers[i].conn = std::make_unique<Conn>(o.socket, o.timeout);
        readers[i].conn->send(pr::FrameType::Attach, pr::encode(pr::AttachRequest{started.id, {pr::LogPosition::Kind::Start, 0}, true, false}));
        const auto a = decoded(pr::decode_attached(readers[i].conn->expect(pr::FrameType::Attached).text()), "ATTACHED");
        if (a.start != 0) throw std::runtime_error("the log dropped bytes before the observers attached");
        readers[i].first_offset = a.offset;
    }
    // The R: the shell has turned echo off and waits in read.
    {
        const auto f = ctl.conn->expect(pr::FrameType::Output);
        if (f.text() != "R") throw std::runtime_error("expected the ready byte R, got " + std::string(f.text()));
        ctl.first_offset = 1;
        ctl.received = 1;
    }
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (auto& r : readers)
        threads.emplace_back([&r, &go, total] {
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            read_all(r, total);
        });
    go.store(true, std::memory_order_release);
    const auto t0 = Clock::now();
    ctl.conn->send(pr::FrameType::Input, "\n");
    for (auto& t : threads) t.join();
    std::string errors;
    for (std::size_t i = 0; i < readers.size(); ++i) {
        const auto& r = readers[i];
        if (!r.error.empty()) errors += (i ? "observer " + std::to_string(i) : std::string("controller")) + ": " + r.error + "; ";
        else if (r.bad_bytes) errors += (i ? "observer " + std::to_string(i) : std::string("controller")) + ": " + std::to_string(r.bad_bytes) + " wrong bytes; ";
        else if (r.received + r.lost != total)
            errors += (i ? "observer " + std::to_string(i) : std::string("controller")) + ": " + std::to_string(r.received) + " received + " +
                      std::to_string(r.lost) + " lost != " + std::to_string(total) + "; ";
    }
    if (ctl.lost != 0) errors += "the controller of a bound session lost " + std::to_string(ctl.lost) + " bytes; ";
    if (!errors.empty()) throw std::runtime_error(errors);
    const double ctl_s = us_between(t0, ctl.last) / 1e6;
    Clock::time_point all = ctl.last;
    std::uint64_t lost = 0, received = 0, notices = 0;
    Stats obs_s;
    for (std::size_t i = 1; i < readers.size(); ++i) {
        all = std::max(all, readers[i].last);
        lost += readers[i].lost;
        received += readers[i].received;
        notices += readers[i].dropped_notices;
        obs_s.v.push_back(us_between(t0, readers[i].last) / 1e6);
    }
    const double all_s = us_between(t0, all) / 1e6;
    std::printf("{\"observers\":%d,\"bytes\":%llu,\"controller_bytes\":%llu,\"controller_seconds\":%.6f,\"controller_mbps\":%.2f,"
                "\"all_seconds\":%.6f,\"all_mbps\":%.2f,\"observer_received\":%llu,\"observer_lost\":%llu,"
                "\"observer_dropped_notices\":%llu,\"observer_seconds\":%s}\n",
                o.observers, static_cast<unsigned long long>(n), static_cast<unsigned long long>(ctl.received - 1), ctl_s,
                static_cast<double>(n) / ctl_s / 1e6, all_s, static_cast<double>(n) / all_s / 1e6,
                static_cast<unsigned long long>(received), static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(notices), obs_s.json().c_str());
    return 0;
}

// ---- idle sessions -----------------------------------------------------------------------

int run_idle_start(const Options& o) {
    const auto t0 = Clock::now();
    std::vector<std::string> ids;
    std::vector<std::unique_ptr<Conn>> pending;
    int sent = 0;
    while (static_cast<int>(ids.size()) < o.sessions) {
        while (sent < o.sessions && static_cast<int>(pending.size()) < o.window) {
            pending.push_back(std::make_unique<Conn>(o.socket, o.timeout));
            pending.back()->send_start(o.argv, /*detach=*/true);
            ++sent;
        }
        std::vector<pollfd> fds;
        for (const auto& c : pending) fds.push_back({c->fd(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), static_cast<int>(o.timeout * 1000)) <= 0)
            throw std::runtime_error("no STARTED within the timeout");
        for (std::size_t k = fds.size(); k-- > 0;) {
            if (!fds[k].revents) continue;
            const auto f = pending[k]->expect(pr::FrameType::Started);
            auto st = decoded(pr::decode_started(f.text()), "STARTED");
            ids.push_back(st.id);
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(k));  // closes: the session goes on
        }
    }
    std::printf("{\"started\":%zu,\"seconds\":%.3f,\"ids\":[", ids.size(), us_between(t0, Clock::now()) / 1e6);
    for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s\"%s\"", i ? "," : "", ids[i].c_str());
    std::printf("]}\n");
    return 0;
}

int run_list(const Options& o) {
    const int count = o.count > 0 ? o.count : 50;
    const int warmup = o.warmup >= 0 ? o.warmup : 5;
    Stats st;
    std::size_t listed = 0, payload = 0;
    for (int i = 0; i < warmup + count; ++i) {
        Conn c(o.socket, o.timeout);
        const auto t0 = Clock::now();
        c.send(pr::FrameType::List, "");
        const auto f = c.expect(pr::FrameType::Sessions);
        const auto t1 = Clock::now();
        const auto sessions = decoded(pr::decode_sessions(f.text()), "SESSIONS");
        listed = sessions.size();
        payload = f.payload.size();
        if (o.expect >= 0 && static_cast<long>(listed) < o.expect && i == 0)
            std::fprintf(stderr, "sessionbench: LIST names %zu sessions, %ld expected\n", listed, o.expect);
        if (i >= warmup) st.v.push_back(us_between(t0, t1));
    }
    std::printf("{\"listed\":%zu,\"payload_bytes\":%zu,\"us\":%s}\n", listed, payload, st.json().c_str());
    return 0;
}

int run_kill(const Options& o) {
    std::vector<std::string> ids;
    for (std::string line; std::getline(std::cin, line);)
        if (!line.empty()) ids.push_back(line);
    const auto t0 = Clock::now();
    std::size_t next = 0, done = 0;
    std::vector<std::unique_ptr<Conn>> pending;
    while (done < ids.size()) {
        while (next < ids.size() && static_cast<int>(pending.size()) < o.window) {
            pending.push_back(std::make_unique<Conn>(o.socket, o.timeout));
            pending.back()->send(pr::FrameType::Kill, pr::encode(pr::KillRequest{ids[next++], 0}));
        }
        std::vector<pollfd> fds;
        for (const auto& c : pending) fds.push_back({c->fd(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), static_cast<int>(o.timeout * 1000)) <= 0)
            throw std::runtime_error("no KILLED within the timeout");
        for (std::size_t k = fds.size(); k-- > 0;) {
            if (!fds[k].revents) continue;
            pending[k]->expect(pr::FrameType::Killed);
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(k));
            ++done;
        }
    }
    std::printf("{\"killed\":%zu,\"seconds\":%.3f}\n", done, us_between(t0, Clock::now()) / 1e6);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    int i = 1;
    if (argc < 2) usage("no mode");
    o.mode = argv[i++];
    auto value = [&](const char* name) -> std::string {
        if (i + 1 >= argc) usage(std::string(name) + " needs a value");
        return argv[++i];
    };
    try {
        for (; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--") {
                for (++i; i < argc; ++i) o.argv.emplace_back(argv[i]);
                break;
            }
            if (a == "--socket") o.socket = value("--socket");
            else if (a == "--count") o.count = std::stoi(value("--count"));
            else if (a == "--warmup") o.warmup = std::stoi(value("--warmup"));
            else if (a == "--window") o.window = std::stoi(value("--window"));
            else if (a == "--observers") o.observers = std::stoi(value("--observers"));
            else if (a == "--lines") o.lines = std::stol(value("--lines"));
            else if (a == "--expect-length") o.expect_length = std::stoull(value("--expect-length"));
            else if (a == "--bytes") o.bytes = std::stoull(value("--bytes"));
            else if (a == "--sessions") o.sessions = std::stoi(value("--sessions"));
            else if (a == "--expect") o.expect = std::stol(value("--expect"));
            else if (a == "--kinds") o.kinds = value("--kinds");
            else if (a == "--timeout") o.timeout = std::stod(value("--timeout"));
            else usage("unknown option " + a);
        }
    } catch (const std::logic_error&) {
        usage("a number was expected");
    }
    if (o.socket.empty()) usage("--socket is required");
    if (o.window < 1 || o.observers < 0 || o.sessions < 1 || o.lines < 1 || o.bytes < 1) usage("a count is out of range");
    if (o.mode == "idle-start" && o.argv.empty()) usage("idle-start needs a command");
    ::signal(SIGPIPE, SIG_IGN);
    try {
        if (o.mode == "replay") return run_replay(o);
        if (o.mode == "observers") return run_observers(o);
        if (o.mode == "idle-start") return run_idle_start(o);
        if (o.mode == "list") return run_list(o);
        if (o.mode == "kill") return run_kill(o);
        usage("unknown mode " + o.mode);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sessionbench: %s\n", e.what());
        return 1;
    }
}
