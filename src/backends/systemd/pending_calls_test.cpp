// PendingCalls against a real sd-bus peer: a private connection over a socketpair, served by
// a second sd_bus in server mode on the same loop. No bus daemon, no systemd.
#include "backends/systemd/pending_calls.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/event.h"

namespace ptyvisor::backends::systemd {
namespace {

using namespace std::chrono_literals;

class PendingCallsTest : public ::testing::Test {
protected:
    void SetUp() override {
        sd_event* e = nullptr;
        ASSERT_GE(sd_event_new(&e), 0);
        event_.reset(e);
        int fds[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
        sd_id128_t id;
        ASSERT_GE(sd_id128_randomize(&id), 0);
        server_ = open_bus(fds[0], [&](sd_bus* b) { return sd_bus_set_server(b, 1, id); });
        client_ = open_bus(fds[1], [](sd_bus*) { return 0; });
        ASSERT_TRUE(server_ && client_);
        // The server answers every call with its argument, in the order the calls came.
        sd_bus_slot* slot = nullptr;
        ASSERT_GE(sd_bus_add_filter(server_.get(), &slot, &PendingCallsTest::echo, this), 0);
        echo_filter_.reset(slot);
    }

    template <class Configure>
    BusPtr open_bus(int fd, Configure configure) {
        sd_bus* raw = nullptr;
        if (sd_bus_new(&raw) < 0) return nullptr;
        BusPtr bus(raw);
        if (sd_bus_set_fd(raw, fd, fd) < 0 || configure(raw) < 0 || sd_bus_start(raw) < 0 ||
            sd_bus_attach_event(raw, event_.get(), 0) < 0)
            return nullptr;
        return bus;
    }

    static int echo(sd_bus_message* m, void* userdata, sd_bus_error*) {
        if (!sd_bus_message_is_method_call(m, nullptr, nullptr)) return 0;
        auto* self = static_cast<PendingCallsTest*>(userdata);
        const char* text = nullptr;
        if (sd_bus_message_read(m, "s", &text) < 0) return 0;
        ++self->served_;
        sd_bus_reply_method_return(m, "s", text);
        return 1;
    }

    MessagePtr echo_call(const char* text) {
        sd_bus_message* raw = nullptr;
        EXPECT_GE(sd_bus_message_new_method_call(client_.get(), &raw, nullptr, "/",
                                                 "org.example.Echo", "Echo"),
                  0);
        MessagePtr m(raw);
        EXPECT_GE(sd_bus_message_append(m.get(), "s", text), 0);
        return m;
    }

    // A handler that records the reply's text.
    PendingCalls::Handler record(std::vector<std::string>& into) {
        return [&into](sd_bus_message* reply) {
            const char* text = nullptr;
            into.emplace_back(sd_bus_message_read(reply, "s", &text) >= 0 && text ? text
                                                                                  : "<error>");
        };
    }

    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!done()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            if (sd_event_run(event_.get(), 10'000) < 0) return false;
        }
        return true;
    }

    // Lets the loop run for a while: for what must not happen.
    void spin(std::chrono::milliseconds d = 100ms) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < until) sd_event_run(event_.get(), 10'000);
    }

    EventLoop event_;  // first: it outlives the buses attached to it
    BusPtr server_, client_;
    SlotPtr echo_filter_;
    int served_ = 0;
};

// The defect PendingCalls removes: with one slot per kind of call, sending the second call
// dropped the first's slot, and the first reply was never seen.
TEST_F(PendingCallsTest, TwoCallsInFlightAreBothAnswered) {
    PendingCalls calls;
    std::vector<std::string> replies;
    ASSERT_GE(calls.call(client_.get(), echo_call("first").get(), record(replies)), 0);
    ASSERT_GE(calls.call(client_.get(), echo_call("second").get(), record(replies)), 0);
    EXPECT_EQ(calls.size(), 2u);
    ASSERT_TRUE(run_until([&] { return replies.size() == 2; })) << replies.size();
    EXPECT_EQ(replies, (std::vector<std::string>{"first", "second"}));
    EXPECT_EQ(calls.size(), 0u) << "an answered call leaves the set";
    spin();
    EXPECT_EQ(replies.size(), 2u) << "each handler runs once";
}

TEST_F(PendingCallsTest, ClearCancelsEveryCallInFlight) {
    PendingCalls calls;
    std::vector<std::string> replies;
    ASSERT_GE(calls.call(client_.get(), echo_call("a").get(), record(replies)), 0);
    ASSERT_GE(calls.call(client_.get(), echo_call("b").get(), record(replies)), 0);
    calls.clear();
    EXPECT_EQ(calls.size(), 0u);
    ASSERT_TRUE(run_until([&] { return served_ == 2; })) << "the server still answers";
    spin();
    EXPECT_TRUE(replies.empty());
}

// A handler may destroy the owner of the set, as a session's callbacks may destroy the
// session: the calls still in flight go with it, unanswered, and nothing touches the set.
TEST_F(PendingCallsTest, AHandlerMayDestroyTheSet) {
    auto calls = std::make_unique<PendingCalls>();
    std::vector<std::string> replies;
    ASSERT_GE(calls->call(client_.get(), echo_call("first").get(),
                          [&](sd_bus_message*) {
                              replies.emplace_back("first");
                              calls.reset();
                          }),
              0);
    ASSERT_GE(calls->call(client_.get(), echo_call("second").get(), record(replies)), 0);
    ASSERT_TRUE(run_until([&] { return served_ == 2 && !calls; }));
    spin();
    EXPECT_EQ(replies, (std::vector<std::string>{"first"}));
}

TEST_F(PendingCallsTest, NoBusNoCall) {
    PendingCalls calls;
    bool called = false;
    EXPECT_EQ(calls.call(nullptr, echo_call("x").get(), [&](sd_bus_message*) { called = true; }),
              -ENOTCONN);
    EXPECT_EQ(calls.size(), 0u);
    spin(20ms);
    EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
