// termbench: one measurement loop, two ways to get a terminal.
//
//   --via pty       the physical limit: forkpty() in this process, read the master directly
//   --via ptyvisor  a session from ptyvisord, spoken to over the wire protocol directly
//                   (src/protocol's frames and payloads; no client library in the way)
//
// Modes (each prints exactly one JSON object on stdout):
//   throughput [--sessions K] [--seconds T] -- CMD...
//       Runs CMD in K sessions at once and reads all their output. With T = 0 (default) it
//       runs every session to its end and reports bytes / wall time from the first connect.
//       With T > 0 it waits until every session has produced output, then counts the bytes
//       relayed in the next T seconds (steady state), then kills the sessions.
//   latency [--count N] [--warmup W] [--echo raw|line] [--ready MARKER] -- CMD...
//       Waits for MARKER in the output, then N times: write one byte, wait for its echo.
//       --echo raw: each 'x' must come back as one byte (`stty raw -echo; cat`).
//       --echo line: the kernel's line discipline echoes (a shell blocked in read): 'a'
//       comes back as one byte and DEL as three ("\b \b"); keys alternate so the line
//       never fills.
//       --echo any: for a relay that redraws (tmux) or wraps the terminal in another one (a
//       CLI run on termbench's own PTY): keys cycle through 'x', 'y', 'z', and a keystroke
//       is echoed when its key appears in the output that follows it, whatever else comes
//       with it. Before the first key, termbench waits until its own terminal no longer
//       echoes (the wrapper has put it in raw mode), so the kernel's echo is never timed.
//   start [--count N] -- CMD...
//       N times: open a session, time the first output byte and the end of the session.
//   hold [--sessions K] -- CMD...
//       Opens K sessions, prints {"ready":K,...} once all have started, keeps them until
//       stdin reaches EOF, then closes them all.
//   flood --report FILE
//       The flood of the fairness benchmark, run inside the relay under test: writes "y\n"
//       lines to stdout as fast as the terminal takes them (what `yes` does), and writes its
//       PID to FILE.pid once running. SIGUSR1 opens the measurement window; SIGTERM or
//       SIGHUP closes it: it writes {"bytes":B,"seconds":T} (what write() accepted inside the
//       window) to FILE and exits 0.
//
// Every wait is bounded (--timeout, seconds): a stuck contender is an error, not a hang.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/fd_passing.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string mode;
    std::string via = "pty";
    std::string socket;
    int sessions = 1;
    double seconds = 0;
    int count = 200;
    int warmup = 20;
    int window = 4;  // ptyvisor: START requests in flight (the daemon bounds per-peer handshakes)
    std::string echo = "raw";
    std::string ready;
    std::string report;
    double timeout = 60;
    std::vector<std::string> argv;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "termbench: %s\n"
                 "usage: termbench throughput|latency|start|hold [--via pty|ptyvisor] [--socket PATH]\n"
                 "       [--sessions K] [--seconds T] [--count N] [--warmup W] [--window W]\n"
                 "       [--echo raw|line|any] [--ready MARKER] [--timeout S] -- CMD [ARGS...]\n"
                 "       termbench flood --report FILE\n",
                 why.c_str());
    std::exit(2);
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A terminal with a command on it, read without blocking.
class Term {
public:
    virtual ~Term() = default;
    [[nodiscard]] virtual int fd() const = 0;
    // Reads what is there. Adds the output byte count to `bytes` and, if `keep`, appends the
    // bytes to `text`. Returns false once the session has ended.
    virtual bool pump(std::uint64_t& bytes, std::string* keep) = 0;
    virtual void send(std::string_view data) = 0;
    [[nodiscard]] virtual bool started() const = 0;
    [[nodiscard]] virtual bool wants_write() const { return false; }
};

class PtyTerm final : public Term {
public:
    explicit PtyTerm(const std::vector<std::string>& argv) {
        winsize ws{};
        ws.ws_row = 24;
        ws.ws_col = 80;
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        int master = -1;
        pid_ = ::forkpty(&master, nullptr, nullptr, &ws);
        if (pid_ < 0) throw std::runtime_error(std::string("forkpty: ") + std::strerror(errno));
        if (pid_ == 0) {
            // main() ignores SIGPIPE for itself; the command gets the default, as from ptyvisord.
            ::signal(SIGPIPE, SIG_DFL);
            ::execvp(args[0], args.data());
            std::fprintf(stderr, "termbench: exec %s: %s\n", args[0], std::strerror(errno));
            ::_exit(127);
        }
        master_ = master;
        ::fcntl(master_, F_SETFD, FD_CLOEXEC);
        ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
    }
    ~PtyTerm() override {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (master_ >= 0) ::close(master_);
    }
    [[nodiscard]] int fd() const override { return master_; }
    [[nodiscard]] bool started() const override { return true; }

    bool pump(std::uint64_t& bytes, std::string* keep) override {
        if (ended_) return false;
        for (int i = 0; i < 16; ++i) {
            const ssize_t n = ::read(master_, buffer_, sizeof buffer_);
            if (n > 0) {
                hangups_ = 0;
                bytes += static_cast<std::uint64_t>(n);
                if (keep) keep->append(buffer_, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return true;
            // EIO: the last holder of the terminal's peer closed it. All output is in only when
            // reads say so three times in a row: the tty's worker can bring the last KiB after
            // the first (src/server/session.cpp, read_terminal).
            if (++hangups_ < 3) continue;
            ended_ = true;
            ::waitpid(pid_, nullptr, 0);
            pid_ = -1;
            return false;
        }
        return true;
    }

    void send(std::string_view data) override {
        while (!data.empty()) {
            const ssize_t n = ::write(master_, data.data(), data.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                pollfd p{master_, POLLOUT, 0};
                ::poll(&p, 1, 1000);
                continue;
            }
            if (n < 0) throw std::runtime_error(std::string("write to pty: ") + std::strerror(errno));
            data.remove_prefix(static_cast<std::size_t>(n));
        }
    }

private:
    pid_t pid_ = -1;
    int master_ = -1;
    bool ended_ = false;
    int hangups_ = 0;  // reads in a row that said EIO (pump)
    char buffer_[64 * 1024];
};

// A raw protocol client (src/protocol only): it tolerates what the client library would
// reject as a violation, OUTPUT before STARTED, and counts it, so that the benchmark can
// measure the daemon and report that ordering bug instead of dying on it.
std::uint64_t g_output_before_started = 0;

class PtyvisorTerm final : public Term {
public:
    PtyvisorTerm(const std::string& socket, const std::vector<std::string>& argv) {
        namespace pr = ptyvisor::protocol;
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        if (socket.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long");
        std::memcpy(addr.sun_path, socket.data(), socket.size());
        fd_ = ptyvisor::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0)
            throw std::runtime_error("connect " + socket + ": " + std::strerror(errno));
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
        const auto frame = pr::encode_frame(pr::FrameType::Start, pr::encode(req));
        if (const int e = pr::send_with_fd(fd_.get(), frame, dir.get()); e != 0)
            throw std::runtime_error(std::string("send START: ") + std::strerror(-e));
        ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
    }
    [[nodiscard]] int fd() const override { return fd_.get(); }
    [[nodiscard]] bool started() const override { return started_; }

    bool pump(std::uint64_t& bytes, std::string* keep) override {
        namespace pr = ptyvisor::protocol;
        if (ended_) return false;
        for (int i = 0; i < 16; ++i) {
            const ssize_t n = ::read(fd_.get(), buffer_, sizeof buffer_);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return true;
            if (n <= 0) {
                ended_ = true;
                if (!exited_ && !started_) throw std::runtime_error("the daemon closed the connection before STARTED");
                return false;
            }
            decoder_.feed(std::span<const std::uint8_t>(buffer_, static_cast<std::size_t>(n)));
            for (;;) {
                const auto status = decoder_.next(frame_);
                if (status == pr::FrameDecoder::Status::NeedMore) break;
                if (status == pr::FrameDecoder::Status::Failed) throw std::runtime_error("bad frame from the daemon");
                switch (frame_.type) {
                    case pr::FrameType::Started: started_ = true; break;
                    case pr::FrameType::Output:
                        if (!started_) ++g_output_before_started;
                        bytes += frame_.payload.size();
                        if (keep) keep->append(frame_.text());
                        break;
                    case pr::FrameType::Exit: exited_ = true; break;
                    case pr::FrameType::Error: {
                        const auto err = pr::decode_error(frame_.text());
                        throw std::runtime_error("ptyvisord refused: " +
                                                 (err ? std::string(pr::to_string(err.value->code)) + ": " + err.value->message
                                                      : std::string(frame_.text())));
                    }
                    default: break;
                }
            }
        }
        return true;
    }

    void send(std::string_view data) override {
        namespace pr = ptyvisor::protocol;
        const auto frame = pr::encode_frame(pr::FrameType::Input, data);
        std::span<const std::uint8_t> left(frame);
        while (!left.empty()) {
            const ssize_t n = ::send(fd_.get(), left.data(), left.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                pollfd p{fd_.get(), POLLOUT, 0};
                ::poll(&p, 1, 1000);
                continue;
            }
            if (n < 0) throw std::runtime_error(std::string("send INPUT: ") + std::strerror(errno));
            left = left.subspan(static_cast<std::size_t>(n));
        }
    }

private:
    ptyvisor::UniqueFd fd_;
    ptyvisor::protocol::FrameDecoder decoder_;
    ptyvisor::protocol::Frame frame_;
    bool started_ = false, exited_ = false, ended_ = false;
    std::uint8_t buffer_[ptyvisor::protocol::kHeaderSize + ptyvisor::protocol::kMaxIoPayloadSize];
};

std::unique_ptr<Term> open_term(const Options& o) {
    if (o.via == "pty") return std::make_unique<PtyTerm>(o.argv);
    return std::make_unique<PtyvisorTerm>(o.socket, o.argv);
}

// Waits until one of `terms` is ready (bounded by `ms`), then pumps the ready ones.
// Ended terms are reset to nullptr. Returns the number of live terms.
std::size_t poll_and_pump(std::vector<std::unique_ptr<Term>>& terms, std::vector<std::uint64_t>& bytes,
                          int ms, std::vector<std::string>* keep = nullptr) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < terms.size(); ++i) {
        if (!terms[i]) continue;
        short events = POLLIN;
        if (terms[i]->wants_write()) events = static_cast<short>(events | POLLOUT);
        fds.push_back({terms[i]->fd(), events, 0});
        index.push_back(i);
    }
    if (fds.empty()) return 0;
    const int r = ::poll(fds.data(), fds.size(), ms);
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    std::size_t live = 0;
    for (std::size_t k = 0; k < fds.size(); ++k) {
        const auto i = index[k];
        if (fds[k].revents != 0 && !terms[i]->pump(bytes[i], keep ? &(*keep)[i] : nullptr)) {
            terms[i].reset();
            continue;
        }
        ++live;
    }
    return live;
}

// Opens `o.sessions` terms, at most `o.window` of them not yet started at any time.
std::vector<std::unique_ptr<Term>> open_many(const Options& o, std::vector<std::uint64_t>& bytes,
                                             Clock::time_point deadline) {
    std::vector<std::unique_ptr<Term>> terms;
    bytes.assign(static_cast<std::size_t>(o.sessions), 0);
    while (true) {
        std::size_t pending = 0;
        for (const auto& t : terms)
            if (t && !t->started()) ++pending;
        if (terms.size() == static_cast<std::size_t>(o.sessions) && pending == 0) break;
        while (terms.size() < static_cast<std::size_t>(o.sessions) && pending < static_cast<std::size_t>(o.window)) {
            terms.push_back(open_term(o));
            if (!terms.back()->started()) ++pending;
        }
        if (pending == 0) continue;
        if (Clock::now() > deadline) throw std::runtime_error("sessions did not start in time");
        // Only pump what is pending; output of started sessions waits in their buffers.
        std::vector<std::unique_ptr<Term>*> waiting;
        std::vector<pollfd> fds;
        for (auto& t : terms)
            if (t && !t->started()) {
                waiting.push_back(&t);
                fds.push_back({t->fd(), POLLIN, 0});
            }
        ::poll(fds.data(), fds.size(), 100);
        for (std::size_t k = 0; k < fds.size(); ++k) {
            if (fds[k].revents == 0) continue;
            auto& t = *waiting[k];
            const auto i = static_cast<std::size_t>(&t - terms.data());
            if (!t->pump(bytes[i], nullptr) && !t->started())
                throw std::runtime_error("a session ended before it started");
        }
    }
    return terms;
}

struct Stats {
    std::vector<double> v;
    [[nodiscard]] double pct(double p) const {
        if (v.empty()) return NAN;
        auto s = v;
        std::sort(s.begin(), s.end());
        const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(s.size()))) ;
        return s[std::min(s.size() - 1, k == 0 ? 0 : k - 1)];
    }
    [[nodiscard]] std::string json(const char* name) const {
        char buf[512];
        if (v.empty()) {
            std::snprintf(buf, sizeof buf, "\"%s\":{\"n\":0}", name);
            return buf;
        }
        double sum = 0;
        for (double x : v) sum += x;
        std::snprintf(buf, sizeof buf,
                      "\"%s\":{\"n\":%zu,\"min\":%.2f,\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"max\":%.2f,\"mean\":%.2f}",
                      name, v.size(), pct(0.0001), pct(50), pct(90), pct(99), pct(100),
                      sum / static_cast<double>(v.size()));
        return buf;
    }
};

int run_throughput(const Options& o) {
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration<double>(o.timeout);
    std::vector<std::uint64_t> bytes;
    auto terms = open_many(o, bytes, std::chrono::time_point_cast<Clock::duration>(deadline));
    if (o.seconds <= 0) {
        while (poll_and_pump(terms, bytes, 200) > 0)
            if (Clock::now() > deadline) throw std::runtime_error("throughput run timed out");
        const double secs = seconds_since(t0);
        std::uint64_t total = 0;
        for (auto b : bytes) total += b;
        std::printf("{\"via\":\"%s\",\"output_before_started\":%llu,\"sessions\":%d,\"bytes\":%llu,\"seconds\":%.6f,\"mbps\":%.2f}\n",
                    o.via.c_str(), static_cast<unsigned long long>(g_output_before_started), o.sessions, static_cast<unsigned long long>(total), secs,
                    static_cast<double>(total) / secs / 1e6);
        return 0;
    }
    // Steady state: every session has produced output, then count over a window.
    while (std::any_of(bytes.begin(), bytes.end(), [](auto b) { return b == 0; })) {
        if (poll_and_pump(terms, bytes, 200) < terms.size())
            throw std::runtime_error("a session ended before the measurement window");
        if (Clock::now() > deadline) throw std::runtime_error("sessions produced no output in time");
    }
    std::uint64_t before = 0;
    for (auto b : bytes) before += b;
    const auto w0 = Clock::now();
    while (seconds_since(w0) < o.seconds) poll_and_pump(terms, bytes, 50);
    const double secs = seconds_since(w0);
    std::uint64_t after = 0;
    for (auto b : bytes) after += b;
    const auto total = after - before;
    std::printf("{\"via\":\"%s\",\"output_before_started\":%llu,\"sessions\":%d,\"bytes\":%llu,\"seconds\":%.6f,\"mbps\":%.2f}\n",
                o.via.c_str(), static_cast<unsigned long long>(g_output_before_started), o.sessions, static_cast<unsigned long long>(total), secs,
                static_cast<double>(total) / secs / 1e6);
    std::fflush(stdout);
    terms.clear();
    return 0;
}

// Pumps `t` until `want` output bytes have arrived after `have` or the time is up.
bool wait_output(Term& t, std::uint64_t& bytes, std::uint64_t want, std::string* keep, double timeout_s) {
    const auto t0 = Clock::now();
    while (bytes < want) {
        pollfd p{t.fd(), POLLIN, 0};
        const int r = ::poll(&p, 1, 100);
        if (r > 0 && !t.pump(bytes, keep)) return bytes >= want;
        if (seconds_since(t0) > timeout_s) return false;
    }
    return true;
}

// --echo any: the wrapper under test puts termbench's terminal in raw mode once it runs; until
// then the kernel would echo the keys itself, and that echo must not be timed.
void wait_until_raw(Term& t, double timeout_s) {
    const auto t0 = Clock::now();
    for (;;) {
        termios tio{};
        if (::tcgetattr(t.fd(), &tio) < 0) throw std::runtime_error(std::string("tcgetattr: ") + std::strerror(errno));
        if (!(tio.c_lflag & (ECHO | ICANON))) return;
        if (seconds_since(t0) > timeout_s) throw std::runtime_error("the wrapper never put the terminal in raw mode");
        std::uint64_t ignored = 0;
        pollfd p{t.fd(), POLLIN, 0};
        if (::poll(&p, 1, 10) > 0) t.pump(ignored, nullptr);
    }
}

// --echo any: a keystroke is echoed when its key shows up in the output after it. Keys cycle,
// so the tail of one key's redraw is never taken for the next key's echo.
void measure_any_echo(Term& t, const Options& o, std::uint64_t& bytes, Stats& st) {
    static constexpr std::string_view kKeys = "xyz";
    for (int i = 0; i < o.warmup + o.count; ++i) {
        const char key = kKeys[static_cast<std::size_t>(i) % kKeys.size()];
        std::string seen;
        const auto k0 = Clock::now();
        t.send(std::string_view(&key, 1));
        while (seen.find(key) == std::string::npos) {
            pollfd p{t.fd(), POLLIN, 0};
            if (::poll(&p, 1, 100) > 0 && !t.pump(bytes, &seen))
                throw std::runtime_error("the session ended at keystroke " + std::to_string(i));
            if (seconds_since(k0) > 5) throw std::runtime_error("no echo within 5 s at keystroke " + std::to_string(i));
        }
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - k0).count();
        if (i >= o.warmup) st.v.push_back(us);
    }
}

int run_latency(const Options& o) {
    auto term = open_term(o);
    std::uint64_t bytes = 0;
    std::string text;
    const auto t0 = Clock::now();
    while (o.ready.empty() ? !term->started() : text.find(o.ready) == std::string::npos) {
        pollfd p{term->fd(), POLLIN, 0};
        if (::poll(&p, 1, 100) > 0 && !term->pump(bytes, &text))
            throw std::runtime_error("the session ended before it was ready; output: " + text);
        if (seconds_since(t0) > o.timeout) throw std::runtime_error("no ready marker; output: " + text);
    }
    // Let the command settle into its read(), then drop whatever else it printed.
    ::usleep(50 * 1000);
    term->pump(bytes, nullptr);
    Stats st;
    if (o.echo == "any") {
        wait_until_raw(*term, o.timeout);
        measure_any_echo(*term, o, bytes, st);
    } else {
        const bool line = o.echo == "line";
        for (int i = 0; i < o.warmup + o.count; ++i) {
            const bool del = line && (i % 2 == 1);
            const std::string_view key = del ? "\x7f" : (line ? "a" : "x");
            const std::uint64_t want = bytes + (del ? 3 : 1);
            const auto k0 = Clock::now();
            term->send(key);
            if (!wait_output(*term, bytes, want, nullptr, 5))
                throw std::runtime_error("no echo within 5 s at keystroke " + std::to_string(i));
            const double us = std::chrono::duration<double, std::micro>(Clock::now() - k0).count();
            if (i >= o.warmup) st.v.push_back(us);
            if (bytes != want) throw std::runtime_error("unexpected extra output during keystroke " + std::to_string(i));
        }
    }
    std::printf("{\"via\":\"%s\",\"output_before_started\":%llu,\"echo\":\"%s\",%s}\n", o.via.c_str(), static_cast<unsigned long long>(g_output_before_started), o.echo.c_str(), st.json("us").c_str());
    return 0;
}

int run_start(const Options& o) {
    Stats first, exit;
    for (int i = 0; i < o.warmup + o.count; ++i) {
        const auto t0 = Clock::now();
        auto term = open_term(o);
        std::uint64_t bytes = 0;
        double first_us = NAN;
        bool live = true;
        while (live) {
            pollfd p{term->fd(), static_cast<short>(POLLIN | (term->wants_write() ? POLLOUT : 0)), 0};
            if (::poll(&p, 1, 100) > 0) live = term->pump(bytes, nullptr);
            if (bytes > 0 && std::isnan(first_us))
                first_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            if (seconds_since(t0) > o.timeout) throw std::runtime_error("session did not end in time");
        }
        const double exit_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (i < o.warmup) continue;
        if (!std::isnan(first_us)) first.v.push_back(first_us);
        exit.v.push_back(exit_us);
    }
    std::printf("{\"via\":\"%s\",\"output_before_started\":%llu,%s,%s}\n", o.via.c_str(), static_cast<unsigned long long>(g_output_before_started), first.json("first_output_us").c_str(),
                exit.json("exit_us").c_str());
    return 0;
}

int run_hold(const Options& o) {
    const auto t0 = Clock::now();
    std::vector<std::uint64_t> bytes;
    auto terms = open_many(o, bytes, std::chrono::time_point_cast<Clock::duration>(t0 + std::chrono::duration<double>(o.timeout)));
    std::printf("{\"via\":\"%s\",\"output_before_started\":%llu,\"ready\":%d,\"seconds\":%.3f}\n", o.via.c_str(), static_cast<unsigned long long>(g_output_before_started), o.sessions, seconds_since(t0));
    std::fflush(stdout);
    // Idle until told to stop: nothing here wakes up, so we never disturb what is measured.
    char c;
    while (::read(0, &c, 1) > 0) {
    }
    terms.clear();
    return 0;
}

// The fairness benchmark's flood. Signal handlers only raise flags; write() is interrupted
// (no SA_RESTART), so a flag is seen within one write even when the relay is slow.
volatile sig_atomic_t g_flood_mark = 0;
volatile sig_atomic_t g_flood_stop = 0;

void write_file(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    std::fputs(text.c_str(), f);
    if (std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) < 0)
        throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

int run_flood(const Options& o) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_flood_mark = 1; };
    ::sigaction(SIGUSR1, &sa, nullptr);
    sa.sa_handler = [](int) { g_flood_stop = 1; };
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);
    char line[8192];
    for (std::size_t k = 0; k < sizeof line; k += 2) std::memcpy(line + k, "y\n", 2);
    write_file(o.report + ".pid", std::to_string(::getpid()) + "\n");
    std::uint64_t bytes = 0;
    bool counting = false;
    Clock::time_point mark{};
    while (!g_flood_stop) {
        if (g_flood_mark && !counting) {
            counting = true;
            mark = Clock::now();
        }
        const ssize_t n = ::write(1, line, sizeof line);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EIO: the relay hung up the terminal
        if (counting) bytes += static_cast<std::uint64_t>(n);
    }
    const double secs = counting ? seconds_since(mark) : 0.0;
    char buf[128];
    std::snprintf(buf, sizeof buf, "{\"bytes\":%llu,\"seconds\":%.6f}\n", static_cast<unsigned long long>(bytes), secs);
    write_file(o.report, buf);
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
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i) o.argv.emplace_back(argv[i]);
            break;
        }
        if (a == "--via") o.via = value("--via");
        else if (a == "--socket") o.socket = value("--socket");
        else if (a == "--sessions") o.sessions = std::stoi(value("--sessions"));
        else if (a == "--seconds") o.seconds = std::stod(value("--seconds"));
        else if (a == "--count") o.count = std::stoi(value("--count"));
        else if (a == "--warmup") o.warmup = std::stoi(value("--warmup"));
        else if (a == "--window") o.window = std::stoi(value("--window"));
        else if (a == "--echo") o.echo = value("--echo");
        else if (a == "--ready") o.ready = value("--ready");
        else if (a == "--report") o.report = value("--report");
        else if (a == "--timeout") o.timeout = std::stod(value("--timeout"));
        else usage("unknown option " + a);
    }
    if (o.mode == "flood") {
        if (o.report.empty()) usage("flood needs --report FILE");
        try {
            return run_flood(o);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "termbench: %s\n", e.what());
            return 1;
        }
    }
    if (o.argv.empty()) usage("no command");
    if (o.echo != "raw" && o.echo != "line" && o.echo != "any") usage("--echo must be raw, line or any");
    if (o.via != "pty" && o.via != "ptyvisor") usage("--via must be pty or ptyvisor");
    if (o.via == "ptyvisor" && o.socket.empty()) usage("--via ptyvisor needs --socket");
    if (o.sessions < 1 || o.window < 1) usage("--sessions and --window must be >= 1");
    ::signal(SIGPIPE, SIG_IGN);
    try {
        if (o.mode == "throughput") return run_throughput(o);
        if (o.mode == "latency") return run_latency(o);
        if (o.mode == "start") return run_start(o);
        if (o.mode == "hold") return run_hold(o);
        usage("unknown mode " + o.mode);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "termbench: %s\n", e.what());
        return 1;
    }
}
