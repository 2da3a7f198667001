// The real `ptyvisor web`, started against no daemon and spoken to over raw sockets: what a
// browser (or a page of another site) would send, byte for byte. Run as root, the server is
// started as nobody (it refuses root, which one test checks).
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/unique_fd.h"

namespace {

using ptyvisor::UniqueFd;

constexpr uid_t kNobody = 65534;
constexpr int kWaitMs = 10000;

// The binary nobody runs: the build tree may be unreachable to it (a clone in /root, mode
// 0700), so a copy goes into a directory of its own that anyone may enter, once per process,
// made before any child is forked.
char copy_dir[] = "/tmp/ptyvisor-web-test.XXXXXX";  // a plain array: valid in an atexit handler

const std::string& runnable_cli() {
    static const std::string path = [] {
        char* dir = copy_dir;
        if (::mkdtemp(dir) == nullptr || ::chmod(dir, 0755) != 0) return std::string(PTYVISOR_CLI_PATH);
        const std::string copy = std::string(dir) + "/ptyvisor";
        std::error_code e;
        std::filesystem::copy_file(PTYVISOR_CLI_PATH, copy, e);
        if (e || ::chmod(copy.c_str(), 0755) != 0) return std::string(PTYVISOR_CLI_PATH);
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(copy_dir, ignored);
        });
        return copy;
    }();
    return path;
}

// A `ptyvisor web` child with its stdout and stderr on pipes.
struct WebProcess {
    pid_t pid = -1;
    UniqueFd out, err;
    std::string first_line;

    ~WebProcess() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }

    // Starts it with `args`; as nobody when `drop` and we are root.
    void start(const std::vector<std::string>& args, bool drop = true) {
        const std::string path = runnable_cli();
        int o[2], e[2];
        ASSERT_EQ(::pipe2(o, O_CLOEXEC), 0);
        ASSERT_EQ(::pipe2(e, O_CLOEXEC), 0);
        pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::dup2(o[1], 1);
            ::dup2(e[1], 2);
            if (drop && ::geteuid() == 0) {
                if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(120);
            }
            std::vector<char*> argv;
            std::string program = path;
            argv.push_back(program.data());
            std::vector<std::string> copy = args;
            for (auto& a : copy) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(path.c_str(), argv.data());
            ::_exit(127);
        }
        ::close(o[1]);
        ::close(e[1]);
        out.reset(o[0]);
        err.reset(e[0]);
    }

    // Reads stdout up to its first newline, waiting for it with poll (no sleep).
    std::string read_first_line() {
        std::string line;
        char c;
        while (true) {
            pollfd p{out.get(), POLLIN, 0};
            if (::poll(&p, 1, kWaitMs) != 1) return line;
            if (::read(out.get(), &c, 1) != 1 || c == '\n') return line;
            line.push_back(c);
        }
    }

    std::string read_stderr() {
        std::string text;
        char buffer[4096];
        pollfd p{err.get(), POLLIN, 0};
        while (::poll(&p, 1, kWaitMs) == 1) {
            const ssize_t n = ::read(err.get(), buffer, sizeof buffer);
            if (n <= 0) break;
            text.append(buffer, static_cast<std::size_t>(n));
        }
        return text;
    }

    // Waits for the exit status; -1 if it did not exit normally.
    int wait_exit() {
        int status = 0;
        if (::waitpid(pid, &status, 0) != pid) return -1;
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
};

UniqueFd connect_tcp(int port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
    const timeval limit{kWaitMs / 1000, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    return fd;
}

void send_all(int fd, const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return;
        sent += static_cast<std::size_t>(n);
    }
}

// Reads until the server closes, or until `enough` says the text so far is complete.
std::string receive(int fd, bool (*enough)(const std::string&) = nullptr) {
    std::string text;
    char buffer[65536];
    while (true) {
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
        if (enough && enough(text)) break;
    }
    return text;
}

bool has_headers(const std::string& text) { return text.find("\r\n\r\n") != std::string::npos; }

int status_of(const std::string& response) {
    if (response.size() < 12 || response.compare(0, 9, "HTTP/1.1 ") != 0) return -1;
    return std::atoi(response.substr(9, 3).c_str());
}

std::string header_of(const std::string& response, const std::string& name) {
    const auto end = response.find("\r\n\r\n");
    std::size_t at = response.find("\r\n");
    while (at != std::string::npos && at < end) {
        const auto next = response.find("\r\n", at + 2);
        const auto line = response.substr(at + 2, next - at - 2);
        if (line.size() > name.size() && strncasecmp(line.c_str(), name.c_str(), name.size()) == 0 &&
            line[name.size()] == ':')
            return line.substr(name.size() + 2);
        at = next;
    }
    return {};
}

class WebServer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = new WebProcess;
        server_->start({"web", "--listen", "127.0.0.1:0", "--socket", "/nonexistent/ptyvisor.sock"});
        url_ = server_->read_first_line();
        const std::string prefix = "http://127.0.0.1:";
        ASSERT_EQ(url_.compare(0, prefix.size(), prefix), 0) << url_ << server_->read_stderr();
        port_ = std::atoi(url_.c_str() + prefix.size());
        token_ = url_.substr(url_.find("?token=") + 7);
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }

    // One request on a fresh connection (Connection: close), the whole response.
    static std::string request(const std::string& target, const std::string& extra_headers = {},
                               const std::string& host = {}) {
        UniqueFd fd = connect_tcp(port_);
        if (!fd) return {};
        send_all(fd.get(), "GET " + target + " HTTP/1.1\r\nHost: " +
                               (host.empty() ? "127.0.0.1:" + std::to_string(port_) : host) +
                               "\r\nConnection: close\r\n" + extra_headers + "\r\n");
        return receive(fd.get());
    }
    static std::string cookie() { return "Cookie: ptyvisor_token=" + token_ + "\r\n"; }
    static std::string upgrade(const std::string& origin) {
        return "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
               (origin.empty() ? std::string() : "Origin: " + origin + "\r\n");
    }
    static std::string own_origin() { return "http://127.0.0.1:" + std::to_string(port_); }

    static inline WebProcess* server_ = nullptr;
    static inline std::string url_, token_;
    static inline int port_ = 0;
};

TEST_F(WebServer, TheFirstLineIsTheUrlWithA64DigitToken) {
    EXPECT_EQ(token_.size(), 64u);
    EXPECT_EQ(token_.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_GT(port_, 0);
}

TEST_F(WebServer, ThePageWithTheTokenRedirectsAndSetsTheCookie) {
    const auto r = request("/?token=" + token_);
    EXPECT_EQ(status_of(r), 303) << r;
    EXPECT_EQ(header_of(r, "Location"), "/");
    EXPECT_EQ(header_of(r, "Set-Cookie"), "ptyvisor_token=" + token_ + "; HttpOnly; SameSite=Strict; Path=/");
    EXPECT_EQ(header_of(r, "Cache-Control"), "no-store");
}

TEST_F(WebServer, ThePageWithoutTheTokenIsForbidden) {
    for (const std::string& target :
         std::vector<std::string>{"/", "/?token=" + token_.substr(1), "/api/sessions", "/assets/index.html"}) {
        const auto r = request(target);
        EXPECT_EQ(status_of(r), 403) << target;
        EXPECT_NE(r.find("this page needs the token printed when the console started"), std::string::npos) << r;
    }
    const auto wrong_cookie = request("/", "Cookie: ptyvisor_token=" + std::string(64, '0') + "\r\n");
    EXPECT_EQ(status_of(wrong_cookie), 403);
}

TEST_F(WebServer, ThePageWithTheCookieIsServedWithItsHeaders) {
    const auto r = request("/", cookie());
    ASSERT_EQ(status_of(r), 200) << r;
    EXPECT_EQ(header_of(r, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(header_of(r, "X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(header_of(r, "Referrer-Policy"), "no-referrer");
    EXPECT_EQ(header_of(r, "X-Frame-Options"), "DENY");
    EXPECT_NE(header_of(r, "Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos);
    EXPECT_NE(r.find("<html"), std::string::npos);
    EXPECT_EQ(status_of(request("/assets/index.html", cookie())), 200);
    EXPECT_EQ(status_of(request("/assets/no-such-file.js", cookie())), 404);
    EXPECT_EQ(status_of(request("/nowhere", cookie())), 404);
}

TEST_F(WebServer, ABadHostIsForbiddenEvenWithTheToken) {
    const auto port = std::to_string(port_);
    for (const std::string& host :
         std::vector<std::string>{"evil.example:" + port, "localhost.evil.example:" + port, "127.0.0.1:1", ""}) {
        const auto r = request("/?token=" + token_, {}, host.empty() ? " " : host);
        EXPECT_EQ(status_of(r), 403) << host;
        EXPECT_EQ(header_of(r, "Set-Cookie"), "") << host;
    }
    EXPECT_EQ(status_of(request("/", cookie(), "localhost:" + port)), 200);
    EXPECT_EQ(status_of(request("/", cookie(), "[::1]:" + port)), 200);
}

TEST_F(WebServer, AWebSocketFromAnotherOriginIsForbiddenBeforeTheUpgrade) {
    for (const std::string origin : {"http://evil.example", "null", "http://localhost:1", ""}) {
        UniqueFd fd = connect_tcp(port_);
        ASSERT_TRUE(fd);
        send_all(fd.get(), "GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                               upgrade(origin) + "\r\n");
        const auto r = receive(fd.get(), has_headers);
        EXPECT_EQ(status_of(r), 403) << origin << r;
        EXPECT_EQ(header_of(r, "Upgrade"), "") << origin;
    }
}

TEST_F(WebServer, AWebSocketFromItsOwnOriginIsAccepted) {
    UniqueFd fd = connect_tcp(port_);
    ASSERT_TRUE(fd);
    send_all(fd.get(), "GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                           upgrade(own_origin()) + "\r\n");
    const auto r = receive(fd.get(), has_headers);  // the socket stays open: no daemon, no list yet
    EXPECT_EQ(status_of(r), 101) << r;
    EXPECT_EQ(header_of(r, "Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST_F(WebServer, APageMessageOver64KiBClosesWith1009) {
    UniqueFd fd = connect_tcp(port_);
    ASSERT_TRUE(fd);
    send_all(fd.get(), "GET /ws/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                           upgrade(own_origin()) + "\r\n");
    ASSERT_EQ(status_of(receive(fd.get(), has_headers)), 101);
    // A masked text frame that says 65537 bytes follow: refused from its header alone.
    std::string frame = "\x81\xff";
    for (int shift = 56; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((65537ull >> shift) & 0xff));
    frame.append(4, '\0');  // the mask
    send_all(fd.get(), frame);
    const auto rest = receive(fd.get(), [](const std::string& t) { return t.find("\x88\x02\x03\xf1") != std::string::npos; });
    EXPECT_NE(rest.find("\x88\x02\x03\xf1"), std::string::npos);  // close, 1009
}

TEST_F(WebServer, ATerminalWithoutADaemonIsAnErrorThenAClose) {
    UniqueFd fd = connect_tcp(port_);
    ASSERT_TRUE(fd);
    const std::string id(32, 'a');
    send_all(fd.get(), "GET /ws/terminal?id=" + id + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                           "\r\n" + cookie() + upgrade(own_origin()) + "\r\n");
    // The server then waits for our answer to its close frame: read up to that frame.
    const auto all = receive(fd.get(), [](const std::string& t) { return t.find("\x88\x02") != std::string::npos; });
    ASSERT_EQ(status_of(all), 101) << all;
    const auto body = all.substr(all.find("\r\n\r\n") + 4);
    ASSERT_GE(body.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(body[0]), 0x81u);  // FIN + text
    std::size_t length = static_cast<unsigned char>(body[1]) & 0x7f, at = 2;
    if (length == 126) {  // a 16-bit length follows
        length = (static_cast<std::size_t>(static_cast<unsigned char>(body[2])) << 8) | static_cast<unsigned char>(body[3]);
        at = 4;
    }
    ASSERT_LT(length, 65536u);
    const auto text = body.substr(at, length);
    EXPECT_NE(text.find(R"("type":"error")"), std::string::npos) << text;
    EXPECT_NE(text.find("daemon_unreachable"), std::string::npos) << text;
    // Then a close frame with 1011.
    const auto rest = body.substr(at + length);
    ASSERT_GE(rest.size(), 4u);
    EXPECT_EQ(static_cast<unsigned char>(rest[0]), 0x88u);
    EXPECT_EQ((static_cast<unsigned char>(rest[2]) << 8) | static_cast<unsigned char>(rest[3]), 1011);
}

TEST_F(WebServer, TheApiSaysWhenTheDaemonDoesNotAnswer) {
    const auto r = request("/api/sessions", cookie());
    EXPECT_EQ(status_of(r), 502) << r;
    EXPECT_EQ(header_of(r, "Content-Type"), "application/json");
}

TEST_F(WebServer, OnlyGetIsAllowed) {
    UniqueFd fd = connect_tcp(port_);
    send_all(fd.get(), "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                           "\r\nConnection: close\r\n" + cookie() + "\r\n");
    EXPECT_EQ(status_of(receive(fd.get())), 405);
}

TEST_F(WebServer, OversizedHeadersAndBodiesAreNotRead) {
    UniqueFd fd = connect_tcp(port_);
    send_all(fd.get(), "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                           "X-Padding: " + std::string(9000, 'x') + "\r\n\r\n");
    EXPECT_EQ(receive(fd.get()), "");  // closed without an answer
    UniqueFd body = connect_tcp(port_);
    send_all(body.get(), "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                             "Content-Length: 5\r\n\r\nhello");
    EXPECT_NE(status_of(receive(body.get())), 200);
}

TEST_F(WebServer, KeepAliveServesSeveralRequestsOnOneConnection) {
    UniqueFd fd = connect_tcp(port_);
    const std::string req = "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() + "\r\n";
    for (int i = 0; i < 3; ++i) {
        send_all(fd.get(), req);
        const auto r = receive(fd.get(), [](const std::string& t) {
            const auto end = t.find("\r\n\r\n");
            if (end == std::string::npos) return false;
            const auto at = t.find("Content-Length: ");
            return at != std::string::npos &&
                   t.size() >= end + 4 + std::strtoul(t.c_str() + at + 16, nullptr, 10);
        });
        EXPECT_EQ(status_of(r), 200) << i;
    }
}

TEST_F(WebServer, The65thConnectionIsTurnedAway) {
    std::vector<UniqueFd> held;
    // 64 open connections, each proven accepted and counted by a first answered request.
    for (int i = 0; i < 64; ++i) {
        UniqueFd fd = connect_tcp(port_);
        ASSERT_TRUE(fd);
        send_all(fd.get(), "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) + "\r\n" + cookie() +
                               "\r\n");
        const auto r = receive(fd.get(), has_headers);
        ASSERT_EQ(status_of(r), 404) << i;
        held.push_back(std::move(fd));
    }
    const auto refused = request("/", cookie());
    EXPECT_EQ(status_of(refused), 503) << refused;
    held.clear();
    // Places are given back: a new connection is served once the server has seen the closes.
    int status = 0;
    for (int attempt = 0; attempt < 100 && status != 200; ++attempt) {
        status = status_of(request("/", cookie()));
        if (status != 200) {
            pollfd none{-1, 0, 0};
            ::poll(&none, 0, 10);  // the server must read 64 EOFs first
        }
    }
    EXPECT_EQ(status, 200);
}

TEST(WebCommand, RefusesRoot) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to check that root is refused";
    WebProcess p;
    p.start({"web", "--listen", "127.0.0.1:0"}, /*drop=*/false);
    EXPECT_EQ(p.wait_exit(), 2);
    EXPECT_NE(p.read_stderr().find("ptyvisor web: runs as the person who supervises, never as root"),
              std::string::npos);
}

TEST(WebCommand, ExitsCleanlyOnSigterm) {
    WebProcess p;
    p.start({"web", "--listen", "127.0.0.1:0", "--socket", "/nonexistent/ptyvisor.sock"});
    ASSERT_NE(p.read_first_line(), "");
    ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
    EXPECT_EQ(p.wait_exit(), 0);
}

// An open page is told the server goes away (close 1001) before it exits.
TEST(WebCommand, SigtermClosesTheWebSocketsWithGoingAway) {
    WebProcess p;
    p.start({"web", "--listen", "127.0.0.1:0", "--socket", "/nonexistent/ptyvisor.sock"});
    const auto url = p.read_first_line();
    const int port = std::atoi(url.c_str() + std::strlen("http://127.0.0.1:"));
    const auto token = url.substr(url.find("?token=") + 7);
    UniqueFd fd = connect_tcp(port);
    ASSERT_TRUE(fd);
    const std::string host = "127.0.0.1:" + std::to_string(port);
    send_all(fd.get(), "GET /ws/events HTTP/1.1\r\nHost: " + host + "\r\nCookie: ptyvisor_token=" + token +
                           "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://" + host + "\r\n\r\n");
    // The "unavailable" message (no daemon) proves the socket is open and served.
    const auto opened = receive(fd.get(), [](const std::string& t) { return t.find("unavailable") != std::string::npos; });
    ASSERT_EQ(status_of(opened), 101) << opened;
    ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
    const auto closing = receive(fd.get(), [](const std::string& t) { return t.find("\x88\x02") != std::string::npos; });
    const auto at = closing.find("\x88\x02");
    ASSERT_NE(at, std::string::npos);
    ASSERT_GE(closing.size(), at + 4);
    EXPECT_EQ((static_cast<unsigned char>(closing[at + 2]) << 8) | static_cast<unsigned char>(closing[at + 3]), 1001);
    // Answer the close as a browser does (masked, mask 0) and hang up: the server then exits
    // at once, without waiting for its grace period.
    send_all(fd.get(), std::string("\x88\x82\0\0\0\0\x03\xe9", 8));
    fd.reset();
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(p.wait_exit(), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(900));
}

// --unix: 0600, removed at exit, and an existing file that is not a socket is left alone.
TEST(WebCommand, UnixSocketIsPrivateAndRemovedAtExit) {
    char dir_template[] = "/tmp/web_e2e.XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::string dir = dir_template;
    if (::geteuid() == 0) {
        ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0);
    }
    const std::string path = dir + "/console.sock";
    {
        WebProcess p;
        p.start({"web", "--unix", path, "--socket", "/nonexistent/ptyvisor.sock"});
        const auto line = p.read_first_line();
        EXPECT_EQ(line.rfind("http://localhost/?token=", 0), 0u) << line;
        struct stat st {};
        ASSERT_EQ(::lstat(path.c_str(), &st), 0);
        EXPECT_TRUE(S_ISSOCK(st.st_mode));
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        // Any Host is accepted behind a proxy; the token still is not optional.
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, path.c_str(), path.size());
        ASSERT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
        send_all(fd.get(), "GET / HTTP/1.1\r\nHost: console.example.org\r\nConnection: close\r\n\r\n");
        EXPECT_EQ(status_of(receive(fd.get())), 403);
        ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
        EXPECT_EQ(p.wait_exit(), 0);
        EXPECT_NE(::lstat(path.c_str(), &st), 0);  // removed
    }
    {
        const std::string file = dir + "/not-a-socket";
        UniqueFd f(::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        WebProcess p;
        p.start({"web", "--unix", file});
        EXPECT_EQ(p.wait_exit(), 1);
        EXPECT_NE(p.read_stderr().find("not a socket"), std::string::npos);
        struct stat st {};
        EXPECT_EQ(::lstat(file.c_str(), &st), 0);
        EXPECT_TRUE(S_ISREG(st.st_mode));
        ::unlink(file.c_str());
    }
    ::rmdir(dir.c_str());
}

}  // namespace
