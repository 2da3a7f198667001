// Server::init(): what serving depends on is in place before the first client, and a failure
// to install any of it is fatal and says which (server.h). Above all the stop signals: with
// SIGTERM blocked (main.cpp) and no handler, only SIGKILL could stop the daemon.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "server/server.h"

namespace ptyvisor::server {
namespace {

class IdleBackend final : public backends::Backend {
public:
    [[nodiscard]] std::string_view name() const override { return "idle"; }
    bool cleanup_orphans(backends::Clock::time_point, std::string&) override { return true; }
    std::unique_ptr<backends::SessionProcesses> start(backends::SessionSpec, backends::SessionEvents, std::string& why) override {
        why = "idle";
        return nullptr;
    }
    backends::PeerVerdict check_peer(const backends::Peer&, std::string&) override {
        return backends::PeerVerdict::Allowed;
    }
    void recheck(backends::RecheckCallback) override {}
};

class ServerInit : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(sd_event_new(&event_), 0);
        ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &saved_), 0);
    }
    void TearDown() override {
        server_.reset();
        ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
        sd_event_unref(event_);
    }

    // Exactly `signals` blocked in this thread.
    static void block_only(const std::vector<int>& signals) {
        sigset_t set;
        sigemptyset(&set);
        for (const int sig : signals) sigaddset(&set, sig);
        ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &set, nullptr), 0);
    }

    static UniqueFd listener() {
        return UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    }

    // Server::init(), and what it logged (stderr: the tests do not run under journald).
    int init(UniqueFd listener, std::string& logged) {
        Config config;
        config.user = "test";
        server_ = std::make_unique<Server>(std::move(config), backends::Account{"test", ::getuid(), ::getgid(), {}, "/", "/bin/sh"},
                                           std::make_unique<IdleBackend>(), event_);
        ::testing::internal::CaptureStderr();
        const int r = server_->init(std::move(listener));
        logged = ::testing::internal::GetCapturedStderr();
        return r;
    }

    static bool logs_to_stderr() { return std::getenv("JOURNAL_STREAM") == nullptr; }

    sd_event* event_ = nullptr;
    sigset_t saved_{};
    std::unique_ptr<Server> server_;
};

TEST_F(ServerInit, SucceedsWithTheStopSignalsBlocked) {
    block_only({SIGTERM, SIGINT, SIGHUP});
    std::string logged;
    EXPECT_EQ(init(listener(), logged), 0) << logged;
}

TEST_F(ServerInit, EachSignalHandlerIsRequired) {
    for (const int missing : {SIGTERM, SIGINT, SIGHUP}) {
        std::vector<int> blocked{SIGTERM, SIGINT, SIGHUP};
        std::erase(blocked, missing);
        block_only(blocked);
        std::string logged;
        // sd-event refuses a handler for a signal that is not blocked.
        EXPECT_EQ(init(listener(), logged), -EBUSY) << sigabbrev_np(missing);
        if (logs_to_stderr()) {
            EXPECT_NE(logged.find(std::string("cannot install the SIG") + sigabbrev_np(missing) + " handler"),
                      std::string::npos)
                << logged;
        }
    }
}

TEST_F(ServerInit, AListenerThatCannotBeWatchedIsFatal) {
    block_only({SIGTERM, SIGINT, SIGHUP});
    std::string logged;
    EXPECT_EQ(init(UniqueFd(), logged), -EBADF);
    if (logs_to_stderr()) {
        EXPECT_NE(logged.find("cannot watch the listener"), std::string::npos) << logged;
    }
}

// The STATUS reply of a daemon without sessions: its backend, version and counters.
TEST_F(ServerInit, StatusReplyDecodes) {
    block_only({SIGTERM, SIGINT, SIGHUP});
    std::string logged;
    ASSERT_EQ(init(listener(), logged), 0) << logged;
    server_->admission().count_rejected(protocol::ErrorCode::Busy);
    const auto d = protocol::decode_status(server_->status_json());
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, server_->status());
    EXPECT_EQ(d.value->backend, "idle");
    EXPECT_FALSE(d.value->version.empty());
    EXPECT_TRUE(d.value->sessions.empty());
    EXPECT_EQ(d.value->counters.rejected.at("busy"), 1u);
}

}  // namespace
}  // namespace ptyvisor::server
