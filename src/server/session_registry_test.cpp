// SessionRegistry on its own: which ended sessions it keeps, for how long, and how many,
// with sessions on a backend the test drives (testing/held_terminal_backend.h), and no Server.
#include "server/session_registry.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/event.h"
#include "server/testing/held_terminal_backend.h"

namespace ptyvisor::server {
namespace {

using protocol::ExitReason;

class Reader final : public SessionClient {
public:
    void session_started() override {}
    void session_start_failed(const std::string&) override {}
    void session_changed() override {}
    void session_input_room() override {}
    void session_gone() override { ++gone; }
    void session_taken_over() override {}
    [[nodiscard]] std::uint64_t cursor() const override { return 0; }
    int gone = 0;
};

class Registry : public ::testing::Test {
protected:
    Registry() {
        sd_event_new(&event_);
        loop_.reset(event_);
        config_.limits.max_sessions = 2;
        config_.timeouts.retention = std::chrono::milliseconds(200);
        config_.timeouts.drain = std::chrono::milliseconds(100);
        backend_ = std::make_unique<testing::HeldTerminalBackend>(event_);
        context_.event = event_;
        context_.config = &config_;
        context_.agent_uid = ::getuid();
        context_.terminal_group = ::getgid();
        context_.admission = &admission_;
        context_.backend = backend_.get();
        registry_ = std::make_unique<SessionRegistry>(
            context_, RegistryHooks{[this] { return "ptyvisor-" + unit_hex(++units_) + ".service"; },
                                    [this] { ++changes_; }, [this] { return shutting_down_; }});
    }

    static std::string unit_hex(int n) {
        std::string hex = std::to_string(n);
        return std::string(32 - hex.size(), '0') + hex;
    }

    // A running session started by `controller`; its id.
    std::string start_running(bool detached, SessionClient& controller) {
        Session& s = registry_->create(detached);
        EXPECT_TRUE(admission_.reserve_session());
        backends::SessionSpec spec;
        spec.argv = {"sh"};
        spec.account.uid = ::getuid();
        spec.account.gid = ::getgid();
        std::string why;
        EXPECT_TRUE(s.start(std::move(spec), protocol::WindowSize{24, 80}, &controller, 1, why)) << why;
        const std::string id = s.id();
        EXPECT_TRUE(run_until([&] { return s.state() == Session::State::Running; }));
        return id;
    }

    // Ends the session `id` (its command exits) and waits until it is Ended.
    void end(const std::string& id) {
        Session* s = registry_->find(id);
        ASSERT_NE(s, nullptr);
        s->stop(ExitReason::Stopped);
        ASSERT_TRUE(run_until([&] {
            Session* now = registry_->find(id);
            return !now || now->state() == Session::State::Ended;
        }));
    }

    bool run_until(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            if (sd_event_run(event_, 1'000'000) < 0) return false;
        }
        return true;
    }

    sd_event* event_ = nullptr;
    EventLoop loop_;
    Config config_;
    Admission admission_{config_.limits};
    std::unique_ptr<testing::HeldTerminalBackend> backend_;
    SessionContext context_;
    std::unique_ptr<SessionRegistry> registry_;
    int units_ = 0, changes_ = 0;
    bool shutting_down_ = false;
};

TEST_F(Registry, ABoundSessionGoesOnceItHasEndedAndItsControllerHasLeft) {
    Reader controller;
    const std::string id = start_running(false, controller);
    end(id);
    Session* s = registry_->find(id);
    ASSERT_NE(s, nullptr);  // its controller still reads its EXIT
    s->detach(&controller, false);
    registry_->client_left(s);
    ASSERT_TRUE(run_until([&] { return changes_ > 0; }));
    EXPECT_EQ(registry_->find(id), nullptr);
    EXPECT_TRUE(registry_->empty());
}

TEST_F(Registry, ADetachedSessionIsKeptForItsRetentionThenGoes) {
    Reader controller;
    const std::string id = start_running(true, controller);
    end(id);
    Session* s = registry_->find(id);
    ASSERT_NE(s, nullptr);
    s->detach(&controller, false);
    registry_->client_left(s);
    EXPECT_NE(registry_->find(id), nullptr);  // kept for a late reader
    ASSERT_TRUE(run_until([&] { return changes_ > 0; }));  // destroyed, on a later iteration
    EXPECT_EQ(registry_->find(id), nullptr);
}

TEST_F(Registry, PastMaxSessionsEndedOnesTheOldestGoAndTheirReadersAreTold) {
    std::vector<std::unique_ptr<Reader>> controllers, readers;
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
        controllers.push_back(std::make_unique<Reader>());
        readers.push_back(std::make_unique<Reader>());
        ids.push_back(start_running(true, *controllers.back()));
        registry_->find(ids.back())->attach(readers.back().get(), Role::Observer);
    }
    for (int i = 0; i < 3; ++i) {
        Session* s = registry_->find(ids[i]);
        s->detach(controllers[i].get(), false);  // a detached session's controller may go
        end(ids[i]);
    }
    ASSERT_TRUE(run_until([&] { return readers[0]->gone > 0; }));
    EXPECT_EQ(registry_->find(ids[0]), nullptr);
    EXPECT_NE(registry_->find(ids[1]), nullptr);
    EXPECT_NE(registry_->find(ids[2]), nullptr);
    EXPECT_EQ(readers[1]->gone, 0);
    for (int i = 1; i < 3; ++i) registry_->find(ids[i])->detach(readers[i].get(), false);
}

TEST_F(Registry, AShutdownStopsEveryRunningSession) {
    Reader a, b;
    const std::string first = start_running(true, a);
    const std::string second = start_running(false, b);
    EXPECT_EQ(registry_->running(), 2U);
    shutting_down_ = true;
    registry_->shut_down();
    ASSERT_TRUE(run_until([&] { return registry_->running() == 0; }));
    for (const auto& id : {first, second}) {
        const Session* s = registry_->find(id);
        ASSERT_NE(s, nullptr);  // its controller still reads its EXIT
        EXPECT_EQ(s->exit_status()->reason, ExitReason::Shutdown);
    }
    registry_->forget_clients();
}

}  // namespace
}  // namespace ptyvisor::server
