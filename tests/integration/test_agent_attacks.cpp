// The agent as the adversary: each test plays one attack that the agent's own account can
// mount on the daemon, and checks that it ends that connection at most, never the daemon,
// and never freezes the loop that serves everyone else.
//
// "The loop is not frozen" is checked by an event, not a clock: while the trap is set, a
// second client starts a session and sees it exit. A frozen loop answers it only when the
// trap lets go, which these tests make far longer than any of their deadlines.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/process.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

constexpr Millis kAnswer{10000};  // any answer a working daemon gives; far below each trap

// A FUSE mount whose server never answers, as the agent could serve one: every request on
// it waits until the test ends the connection (unmount and close /dev/fuse).
class SilentFuse {
public:
    SilentFuse(std::string dir, uid_t owner, gid_t group) : dir_(std::move(dir)) {
        std::filesystem::create_directories(dir_);
        device_.reset(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
        if (!device_) return;
        // allow_other: the mount is the agent's, and root's requests reach it too.
        const std::string options = "fd=" + std::to_string(device_.get()) + ",rootmode=40000,user_id=" +
                                    std::to_string(owner) + ",group_id=" + std::to_string(group) +
                                    ",allow_other";
        mounted_ = ::mount("ptyvisor-silent", dir_.c_str(), "fuse.ptyvisor-silent", MS_NOSUID | MS_NODEV,
                           options.c_str()) == 0;
        if (!mounted_) error_ = std::strerror(errno);
    }
    ~SilentFuse() { release(); }
    SilentFuse(const SilentFuse&) = delete;
    SilentFuse& operator=(const SilentFuse&) = delete;

    [[nodiscard]] bool mounted() const { return mounted_; }
    [[nodiscard]] const std::string& error() const { return error_; }
    [[nodiscard]] const std::string& dir() const { return dir_; }
    // An O_PATH handle of the mount's root: opening it sends the server nothing.
    [[nodiscard]] UniqueFd root_handle() const {
        return UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    // Ends the connection: every request waiting on it fails at once.
    void release() {
        if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
        mounted_ = false;
        device_.reset();
    }

private:
    std::string dir_;
    UniqueFd device_;
    bool mounted_ = false;
    std::string error_ = "cannot open /dev/fuse";
};

// A loopback TCP connection whose sending side lingers: its send queue is full and its
// peer never reads, so the last close() of it blocks for the linger time (here 10 minutes).
struct LingeringSocket {
    UniqueFd listener, sender, receiver;

    bool make() {
        listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listener.get(), 1) != 0 ||
            ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            return false;
        sender.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        const int small = 4096;
        ::setsockopt(sender.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        if (::connect(sender.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
        receiver.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!receiver) return false;
        ::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        ::fcntl(sender.get(), F_SETFL, O_NONBLOCK);
        const std::string chunk(4096, 'x');
        std::size_t queued = 0;
        while (::send(sender.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) queued += chunk.size();
        if (errno != EAGAIN || queued == 0) return false;
        const linger l{1, 600};
        return ::setsockopt(sender.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l) == 0;
    }
};

// Valgrind runs one thread at a time and keeps running it through close() and fstat(), which
// it does not count as calls that block: a worker blocked there, as these attacks make one,
// stalls every thread of the daemon under valgrind, never without it. The plain and the
// ASan runs test these.
#define SKIP_UNDER_VALGRIND()                                                                     \
    if (std::getenv("PTYVISOR_VALGRIND") != nullptr)                                              \
    GTEST_SKIP() << "SKIPPED, NOT TESTED under valgrind: it serializes threads through close() " \
                    "and fstat(), so a blocked worker stalls the loop there only"

class AgentAttack : public EndToEnd {
protected:
    DaemonConfig attack_config() {
        DaemonConfig c = config();
        c.admissions_per_minute = 1000000;
        return c;
    }

    // Another client, meanwhile: a whole session from START to EXIT.
    void expect_daemon_serves_another_session() {
        auto other = connect_as_account();
        ASSERT_NE(other, nullptr);
        ASSERT_TRUE(start_session(*other, {"true"}));
        std::string seen;
        const auto exit = other->read_until_exit(kAnswer, &seen);
        ASSERT_TRUE(exit) << "the daemon did not serve another client meanwhile: " << seen;
        EXPECT_EQ(exit->shell_status(), 0);
    }
};

// Finding 1: a command name of 5000 bytes made an ERROR over its 4096-byte bound, and the
// exception that followed ended the daemon with every session.
TEST_F(AgentAttack, CommandNameLongerThanAnErrorEndsOnlyItsConnection) {
    DaemonProcess* d = start_daemon(attack_config());
    ASSERT_NE(d, nullptr);
    // Plain bytes, bytes JSON escapes sixfold, and bytes that are not UTF-8.
    for (const std::string& name : {std::string(5000, 'a'), std::string(5000, '\x01'),
                                   std::string(5000, '\xff'), "/" + std::string(250, 'b') + "/" + std::string(4000, 'c')}) {
        auto c = connect_as_account();
        ASSERT_NE(c, nullptr);
        UniqueFd cwd = open_work_dir();
        ASSERT_EQ(c->send_start(RawClient::start_request({name}, session_env(), cwd.get()), {cwd.get()}), 0);
        std::string seen;
        const auto err = c->expect_error(kAnswer, &seen);
        ASSERT_TRUE(err) << seen;
        EXPECT_EQ(err->code, protocol::ErrorCode::StartFailed) << err->message;
        EXPECT_LE(err->message.size(), protocol::kMaxErrorMessageBytes);
        EXPECT_TRUE(c->expect_eof(kAnswer, &seen)) << seen;
        ASSERT_TRUE(d->running()) << "the daemon died of a command name";
    }
    expect_daemon_serves_another_session();
}

// Finding 1, through a refusal that quotes the peer: a process inside a session connects
// from a cgroup whose path is longer than an ERROR (the systemd backend quotes it).
TEST_F(AgentAttack, PeerInACgroupPathLongerThanAnErrorEndsOnlyItsConnection) {
    DaemonProcess* d = start_daemon(attack_config());
    ASSERT_NE(d, nullptr);
    auto session = connect_as_account();
    ASSERT_NE(session, nullptr);
    const auto started = start_session(*session, {"sleep", "1000"});
    ASSERT_TRUE(started);
    const std::string procs_cgroup = read_text_file("/proc/" + std::to_string(started->pid) + "/cgroup");
    const auto unified = procs_cgroup.rfind("0::/", 0) == 0 ? 0 : procs_cgroup.find("\n0::/");
    ASSERT_NE(unified, std::string::npos) << procs_cgroup;
    const auto from = procs_cgroup.find("0::/", unified) + 3;
    const auto mount = cgroup2_mount();
    ASSERT_TRUE(mount) << "no cgroup v2 hierarchy";
    std::string dir = *mount + procs_cgroup.substr(from, procs_cgroup.find('\n', from) - from);
    // Fifteen nested cgroups named with 200 control bytes each: JSON writes each byte as
    // six, so the path quoted in an ERROR would take some 18000 bytes of its 4096.
    std::vector<std::string> made;
    for (int i = 0; i < 15; ++i) {
        dir += "/" + std::string(199, '\x01') + static_cast<char>('a' + i);
        ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir.size() << ": " << std::strerror(errno);
        made.push_back(dir);
    }
    std::string error;
    auto connector = Connector::start(account_->uid, account_->gid, {account_->gid}, error);
    ASSERT_NE(connector, nullptr) << error;
    write_text_file(dir + "/cgroup.procs", std::to_string(connector->pid()));
    auto c = connect_raw(*connector, socket_, error);
    ASSERT_NE(c, nullptr) << error;
    std::string seen;
    const auto err = c->expect_error(kAnswer, &seen);
    ASSERT_TRUE(err) << seen;
    EXPECT_EQ(err->code, protocol::ErrorCode::NotAllowed) << err->message;
    EXPECT_LE(err->message.size(), protocol::kMaxErrorMessageBytes);
    ASSERT_TRUE(d->running()) << "the daemon died of a refusal";
    // The session's cgroup must be empty of ours before the daemon removes it: the helper
    // is reaped (its destructor waits), so its cgroup is empty.
    c.reset();
    connector.reset();
    for (auto it = made.rbegin(); it != made.rend(); ++it) EXPECT_EQ(::rmdir(it->c_str()), 0) << std::strerror(errno);
    expect_daemon_serves_another_session();
}

// Finding 2: the daemon closed a descriptor the client sent on its only thread. A lingering
// socket held that close, and with it every other client, for the linger time.
TEST_F(AgentAttack, LingeringSocketSentAsDirectoryDoesNotFreezeTheLoop) {
    SKIP_UNDER_VALGRIND();
    DaemonProcess* d = start_daemon(attack_config());
    ASSERT_NE(d, nullptr);
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    LingeringSocket trap;
    ASSERT_TRUE(trap.make()) << std::strerror(errno);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    // The daemon's copy must be the last, so that its close() is the one that lingers: the
    // descriptor rides on the first byte, the test lets go of its own, then the rest follows.
    const auto start = protocol::encode_frame(
        FrameType::Start, protocol::encode(RawClient::start_request({"true"}, session_env(), trap.sender.get())));
    ASSERT_EQ(c->send(std::vector<std::uint8_t>(start.begin(), start.begin() + 1), {trap.sender.get()}), 0);
    trap.sender.reset();
    ASSERT_EQ(c->send(std::vector<std::uint8_t>(start.begin() + 1, start.end())), 0);
    std::string seen;
    const auto err = c->expect_error(kAnswer, &seen);
    ASSERT_TRUE(err) << seen;
    EXPECT_EQ(err->code, protocol::ErrorCode::NotADirectory);
    expect_daemon_serves_another_session();
    // The peer goes: the lingering close() returns, and the daemon holds nothing more.
    trap.receiver.reset();
    EXPECT_EQ(d->fd_count_converging_to(idle, Millis(10000)), idle);
    EXPECT_TRUE(d->running());
}

// Finding 2, the same through the socket itself: a descriptor that waits unread in the
// connection's queue is released when the daemon closes the connection. The START's
// directory is on a silent FUSE mount, so the daemon reads nothing behind it.
TEST_F(AgentAttack, LingeringSocketLeftUnreadInTheConnectionDoesNotFreezeTheLoop) {
    SKIP_UNDER_VALGRIND();
    DaemonConfig cfg = attack_config();
    cfg.handshake = 2;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    SilentFuse fuse(dir_->path() + "/silent", account_->uid, account_->gid);
    ASSERT_TRUE(fuse.mounted()) << "cannot mount FUSE here: " << fuse.error();
    UniqueFd root = fuse.root_handle();
    ASSERT_TRUE(root) << std::strerror(errno);
    LingeringSocket trap;
    ASSERT_TRUE(trap.make()) << std::strerror(errno);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd work = open_work_dir();
    ASSERT_EQ(c->send_start(RawClient::start_request({"true"}, session_env(), work.get()), {root.get()}), 0);
    ASSERT_EQ(c->send_frame(FrameType::Input, "x", {trap.sender.get()}), 0);
    trap.sender.reset();
    root.reset();
    std::string seen;
    ASSERT_TRUE(c->expect_error(kAnswer, &seen)) << seen;  // the handshake deadline
    EXPECT_TRUE(c->expect_eof(kAnswer, &seen)) << seen;
    expect_daemon_serves_another_session();
    trap.receiver.reset();
    fuse.release();
    EXPECT_TRUE(d->running());
}

// Finding 2: fstat() of the START directory, on a FUSE mount whose server never answers.
TEST_F(AgentAttack, UnansweredFuseDirectoryDoesNotFreezeTheLoop) {
    SKIP_UNDER_VALGRIND();
    DaemonConfig cfg = attack_config();
    cfg.handshake = 2;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    const long idle = d->idle_fd_count();
    ASSERT_GT(idle, 0);
    SilentFuse fuse(dir_->path() + "/silent", account_->uid, account_->gid);
    ASSERT_TRUE(fuse.mounted()) << "cannot mount FUSE here: " << fuse.error();
    UniqueFd root = fuse.root_handle();
    ASSERT_TRUE(root) << std::strerror(errno);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd work = open_work_dir();
    auto request = RawClient::start_request({"true"}, session_env(), work.get());  // fstat of `root` would hang us too
    ASSERT_EQ(c->send_start(request, {root.get()}), 0);
    root.reset();
    expect_daemon_serves_another_session();
    // The handshake deadline answers the trapped START, while the worker still waits.
    std::string seen;
    const auto err = c->expect_error(kAnswer, &seen);
    ASSERT_TRUE(err) << seen;
    EXPECT_EQ(err->code, protocol::ErrorCode::StartFailed) << err->message;
    fuse.release();
    EXPECT_EQ(d->fd_count_converging_to(idle, Millis(10000)), idle);
    EXPECT_TRUE(d->running());
}

// Finding 2: the command is looked up in a PATH entry on that mount.
TEST_F(AgentAttack, UnansweredFusePathEntryDoesNotFreezeTheLoop) {
    SKIP_UNDER_VALGRIND();
    DaemonConfig cfg = attack_config();
    cfg.handshake = 2;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    SilentFuse fuse(dir_->path() + "/silent", account_->uid, account_->gid);
    ASSERT_TRUE(fuse.mounted()) << "cannot mount FUSE here: " << fuse.error();
    auto env = session_env();
    std::erase_if(env, [](const std::string& e) { return e.rfind("PATH=", 0) == 0; });
    env.push_back("PATH=" + fuse.dir() + ":/usr/bin:/bin");
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    UniqueFd work = open_work_dir();
    ASSERT_EQ(c->send_start(RawClient::start_request({"true"}, env, work.get()), {work.get()}), 0);
    expect_daemon_serves_another_session();
    std::string seen;
    const auto err = c->expect_error(kAnswer, &seen);
    ASSERT_TRUE(err) << seen;
    EXPECT_EQ(err->code, protocol::ErrorCode::StartFailed) << err->message;
    fuse.release();
    EXPECT_TRUE(d->running());
}

// Finding 9: the command was looked up as root, so "not found" against "cannot execute"
// told the agent what exists in a directory it cannot search. Both must read the same.
TEST_F(AgentAttack, CommandInADirectoryTheAgentCannotSearchLooksLikeAMissingOne) {
    ASSERT_NE(start_daemon(attack_config()), nullptr);
    const std::string secret = dir_->path() + "/root-only";
    ASSERT_EQ(::mkdir(secret.c_str(), 0700), 0);
    ASSERT_EQ(::chown(secret.c_str(), 0, 0), 0);
    std::filesystem::copy_file("/bin/true", secret + "/tool");
    ASSERT_EQ(::chmod((secret + "/tool").c_str(), 0755), 0);

    // The first answer to START, with the command's name replaced by NAME.
    auto answer_for = [&](const std::string& name) -> std::string {
        auto c = connect_as_account();
        if (!c) return "no connection";
        UniqueFd cwd = open_work_dir();
        c->send_start(RawClient::start_request({name}, session_env(), cwd.get()), {cwd.get()});
        std::string seen;
        const auto err = c->expect_error(kAnswer, &seen);
        if (!err) return "no ERROR: " + seen;
        std::string message = err->message;
        for (auto at = message.find(name); at != std::string::npos; at = message.find(name))
            message.replace(at, name.size(), "NAME");
        return std::string(protocol::to_string(err->code)) + ": " + message;
    };
    const std::string present = answer_for(secret + "/tool");
    const std::string absent = answer_for(secret + "/nothing-here");
    EXPECT_EQ(present.rfind("start_failed: ", 0), 0u) << present;
    EXPECT_EQ(present, absent) << "the answer tells whether " << secret << "/tool exists";
}

}  // namespace
}  // namespace ptyvisor::itest
