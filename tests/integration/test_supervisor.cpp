// A person at the wheel (docs/protocol.md, section 12): a member of supervisor_group (here,
// nobody with Debian's adm as a supplementary group) watches a session of the agent's and
// takes its terminal; the agent's input is then refused, never dropped in silence, and comes
// back when the person hands the terminal back or goes. Old clients keep working: they are
// let go with DETACHED taken_over and get busy, errors they already know.
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <string>
#include <vector>

#include "protocol/control_payloads.h"
#include "protocol/session_payloads.h"
#include "support/fixture.h"
#include "support/sessions_fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534, kAdm = 4, kUsers = 100;

class Supervisor : public Sessions {
protected:
    DaemonConfig supervised_config() {
        DaemonConfig cfg = config();
        cfg.supervisor_group = "adm";
        cfg.observer_group = "users";
        return cfg;
    }
    // A person: nobody, with the socket's group (to connect) and `group`.
    std::unique_ptr<RawClient> person(gid_t group) { return connect_as(kNobody, kNogroup, {account_->gid, group}); }

    // Reads frames, keeping OUTPUT in the client's output(), until one of `type` arrives.
    static std::optional<protocol::Frame> next_of(RawClient& c, FrameType type, std::string* seen = nullptr) {
        for (;;) {
            auto in = c.next(kReply);
            if (in.kind != Incoming::Kind::Frame) {
                if (seen) *seen += in.describe();
                return std::nullopt;
            }
            if (in.frame.type == type) return std::move(in.frame);
            if (in.frame.type == FrameType::Output) c.append_output(std::string(in.frame.text()));
            else if (seen) *seen += std::string(protocol::to_string(in.frame.type)) + " " + std::string(in.frame.text()) + "; ";
        }
    }
    static std::optional<protocol::ControllerNotice> next_controller(RawClient& c) {
        std::string seen;
        const auto f = next_of(c, FrameType::Controller, &seen);
        if (!f) {
            ADD_FAILURE() << "no CONTROLLER: " << seen;
            return std::nullopt;
        }
        return protocol::decode_controller(f->text()).value;
    }
    static void send_control(RawClient& c, bool take) {
        ASSERT_EQ(c.send_frame(FrameType::Control, protocol::encode(protocol::ControlRequest{take})), 0);
    }
    std::string send_input(const std::string& id, const std::string& bytes, std::uint8_t version) {
        auto c = connect_as_account();
        if (!c) return "(no connection)";
        if (c->send(protocol::encode_frame(FrameType::Send, id + bytes, version)) != 0) return "(send failed)";
        auto in = c->next(kReply);
        if (in.kind != Incoming::Kind::Frame) return in.describe();
        if (in.frame.type == FrameType::Sent) return "sent";
        const auto e = protocol::decode_error(in.frame.text());
        return e ? std::string(protocol::to_string(e.value->code)) : "(bad ERROR)";
    }
};

TEST_F(Supervisor, APersonTakesTheTerminalAndTheAgentsInputIsRefusedUntilHandedBack) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());

    auto agent = attach(id, /*observe=*/false);
    ASSERT_NE(agent, nullptr);
    const auto agent_attached = expect_attached(*agent);
    ASSERT_TRUE(agent_attached);
    EXPECT_FALSE(agent_attached->may_control);

    auto supervisor = person(kAdm);
    ASSERT_NE(supervisor, nullptr);
    ASSERT_EQ(supervisor->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, true, false})), 0);
    const auto watching = expect_attached(*supervisor);
    ASSERT_TRUE(watching);
    EXPECT_TRUE(watching->may_control);
    EXPECT_FALSE(watching->held);

    send_control(*supervisor, true);
    const auto mine = next_controller(*supervisor);
    ASSERT_TRUE(mine);
    EXPECT_EQ(mine->controller, protocol::ControllerNotice::Kind::Supervisor);
    EXPECT_TRUE(mine->you);
    EXPECT_EQ(mine->uid, static_cast<std::int64_t>(kNobody));
    const auto told = next_controller(*agent);
    ASSERT_TRUE(told);
    EXPECT_EQ(told->controller, protocol::ControllerNotice::Kind::Supervisor);
    EXPECT_FALSE(told->you);
    EXPECT_EQ(told->uid, static_cast<std::int64_t>(kNobody));

    // The agent's keystrokes: refused, and said so.
    ASSERT_EQ(agent->send_frame(FrameType::Input, "typed-by-the-agent\n"), 0);
    std::string seen;
    const auto refused = next_of(*agent, FrameType::Refused, &seen);
    ASSERT_TRUE(refused) << seen;
    const auto notice = protocol::decode_refused(refused->text());
    ASSERT_TRUE(notice) << notice.error;
    EXPECT_EQ(notice.value->code, "held_by_supervisor");
    EXPECT_EQ(notice.value->what, "input");
    EXPECT_EQ(send_input(id, "sent-by-the-agent\n", 5), "held_by_supervisor");
    EXPECT_EQ(send_input(id, "sent-by-an-old-agent\n", 4), "busy");

    const auto listed = list();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_TRUE(listed.front().held);
    EXPECT_EQ(listed.front().controller_uid, static_cast<std::int64_t>(kNobody));
    EXPECT_TRUE(listed.front().controller_since.has_value());

    // The person types; the agent sees it, and none of its own refused input.
    ASSERT_EQ(supervisor->send_frame(FrameType::Input, "typed-by-the-person\n"), 0);
    EXPECT_TRUE(supervisor->read_output_until("typed-by-the-person\r\ntyped-by-the-person\r\n", kReply, &seen)) << seen;
    EXPECT_TRUE(agent->read_output_until("typed-by-the-person\r\ntyped-by-the-person\r\n", kReply, &seen)) << seen;
    EXPECT_EQ(agent->output().find("agent"), std::string::npos) << agent->output();

    send_control(*supervisor, false);
    const auto back = next_controller(*agent);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->controller, protocol::ControllerNotice::Kind::Agent);
    EXPECT_FALSE(back->uid.has_value());
    ASSERT_EQ(agent->send_frame(FrameType::Input, "the-agent-again\n"), 0);
    EXPECT_TRUE(agent->read_output_until("the-agent-again\r\nthe-agent-again\r\n", kReply, &seen)) << seen;
    EXPECT_EQ(send_input(id, "z", 5), "sent");
    EXPECT_FALSE(list().front().held);
}

// An agent whose client speaks version 4 cannot hear CONTROLLER or REFUSED: a person taking
// the terminal lets it go (DETACHED taken_over, a reply it knows), the session goes on
// detached, and until the person goes its ATTACH as controller and its SEND get busy.
TEST_F(Supervisor, AnOlderAgentClientIsLetGoAndGetsBusyUntilThePersonGoes) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto agent = connect_as_account();
    ASSERT_NE(agent, nullptr);
    ASSERT_EQ(agent->send(protocol::encode_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, false}), 4)), 0);
    ASSERT_TRUE(expect_attached(*agent));

    // `ptyvisor attach --takeover` from a supervisor: ATTACH as controller with takeover.
    auto supervisor = person(kAdm);
    ASSERT_NE(supervisor, nullptr);
    ASSERT_EQ(supervisor->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, true})), 0);
    const auto holding = expect_attached(*supervisor);
    ASSERT_TRUE(holding);
    EXPECT_TRUE(holding->held);
    EXPECT_EQ(holding->controller_uid, static_cast<std::int64_t>(kNobody));

    std::string seen;
    const auto let_go = next_of(*agent, FrameType::Detached, &seen);
    ASSERT_TRUE(let_go) << seen;
    EXPECT_EQ(protocol::decode_detached(let_go->text()).value->reason, "taken_over");
    EXPECT_TRUE(agent->expect_eof(kReply, &seen)) << seen;

    auto again = connect_as_account();
    ASSERT_NE(again, nullptr);
    ASSERT_EQ(again->send(protocol::encode_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, false}), 4)), 0);
    const auto refused = again->expect_error(kReply, &seen);
    ASSERT_TRUE(refused) << seen;
    EXPECT_EQ(refused->code, protocol::ErrorCode::Busy);
    EXPECT_NE(refused->message.find("a person"), std::string::npos) << refused->message;
    EXPECT_EQ(send_input(id, "x", 4), "busy");

    // The person goes without a word: the terminal is the agent's again, the session runs on.
    supervisor.reset();
    const auto listed = list();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed.front().state, protocol::State::Running);
    EXPECT_TRUE(listed.front().detached);
    // The daemon may not have read the close yet: each SEND is a round trip through its loop,
    // so a few suffice; bounded.
    std::string answer;
    for (int i = 0; i < 200 && (answer = send_input(id, "y", 4)) == "busy"; ++i) {
    }
    EXPECT_EQ(answer, "sent");
}

// An observer (observer_group) is not a supervisor: it may neither take nor hold.
TEST_F(Supervisor, AnObserverCannotTakeTheTerminal) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto observer = person(kUsers);
    ASSERT_NE(observer, nullptr);
    ASSERT_EQ(observer->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, true, false})), 0);
    const auto watching = expect_attached(*observer);
    ASSERT_TRUE(watching);
    EXPECT_FALSE(watching->may_control);
    send_control(*observer, true);
    std::string seen;
    const auto refused = observer->expect_error(kReply, &seen);
    ASSERT_TRUE(refused) << seen;
    EXPECT_EQ(refused->code, protocol::ErrorCode::NotAllowed);

    auto taker = person(kUsers);
    ASSERT_NE(taker, nullptr);
    EXPECT_EQ(error_of(exchange(*taker, FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, true}))),
              "not_allowed");
    EXPECT_FALSE(list().front().held);
}

// LIST says what the requester is (version 5), so a console shows "take control" only to
// those who may.
TEST_F(Supervisor, ListSaysWhoTheRequesterIs) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const auto role_of = [&](std::unique_ptr<RawClient> c) -> std::string {
        if (!c) return "(no connection)";
        const auto frames = exchange(*c, FrameType::List, "");
        if (frames.size() != 1) return "(no reply)";
        const auto r = protocol::decode_sessions_reply(frames.front().text());
        return r && r.value->role ? *r.value->role : "(none)";
    };
    EXPECT_EQ(role_of(connect_as_account()), "agent");
    EXPECT_EQ(role_of(person(kAdm)), "supervisor");
    EXPECT_EQ(role_of(person(kUsers)), "observer");
    EXPECT_EQ(role_of(connect_as(0, 0, {0})), "root");
}

}  // namespace
}  // namespace ptyvisor::itest

namespace ptyvisor::itest {
namespace {

// An agent that floods its terminal while a person holds it costs the daemon one REFUSED a
// second (with the count), not one frame each, and none of its bytes reaches the terminal;
// every refused frame is counted in the notices by the time the terminal is handed back.
TEST_F(Supervisor, AgentAttackFloodOfRefusedInputCostsOneNoticeASecondNotOneEach) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto agent = attach(id, /*observe=*/false);
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(expect_attached(*agent));
    auto supervisor = person(kAdm);
    ASSERT_NE(supervisor, nullptr);
    ASSERT_EQ(supervisor->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, true})), 0);
    ASSERT_TRUE(expect_attached(*supervisor));
    ASSERT_TRUE(next_controller(*agent));

    constexpr std::uint64_t kFrames = 20000;
    const auto began = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> flood;
    for (std::uint64_t i = 0; i < kFrames; ++i) {
        const auto f = protocol::encode_frame(FrameType::Input, "x");
        flood.insert(flood.end(), f.begin(), f.end());
    }
    ASSERT_EQ(agent->send(flood), 0);
    // The daemon has read the whole flood once nothing is left unread on the agent's socket
    // (SIOCOUTQ: bytes the peer has not read), and it handles what one read brings before any
    // other event. No event says so; the wait is bounded.
    int unread = -1;
    for (int i = 0; i < 10000 && (::ioctl(agent->fd(), SIOCOUTQ, &unread) != 0 || unread > 0); ++i) ::usleep(1000);
    ASSERT_EQ(unread, 0) << "the daemon did not read the flood";
    ASSERT_EQ(supervisor->send_frame(FrameType::Input, "after-the-flood\n"), 0);
    std::string seen;
    ASSERT_TRUE(supervisor->read_output_until("after-the-flood\r\nafter-the-flood\r\n", kReply, &seen)) << seen;
    send_control(*supervisor, false);

    std::uint64_t notices = 0, counted = 0;
    for (;;) {
        auto in = agent->next(kReply);
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
        if (in.frame.type == FrameType::Output) {
            agent->append_output(std::string(in.frame.text()));
            continue;
        }
        if (in.frame.type == FrameType::Controller) break;
        ASSERT_EQ(in.frame.type, FrameType::Refused) << protocol::to_string(in.frame.type);
        const auto r = protocol::decode_refused(in.frame.text());
        ASSERT_TRUE(r) << r.error;
        ++notices;
        counted += r.value->count;
    }
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - began).count();
    EXPECT_EQ(counted, kFrames);
    EXPECT_LE(notices, static_cast<std::uint64_t>(seconds) + 2) << "one REFUSED a second, and the rest at the hand-back";
    EXPECT_EQ(agent->output().find('x'), std::string::npos) << "a refused byte reached the terminal";
}

}  // namespace
}  // namespace ptyvisor::itest

namespace ptyvisor::itest {
namespace {

// A person who takes and hands back in a loop, while the agent's client reads nothing, must
// not make the daemon queue a CONTROLLER per change for it: past one frame's worth queued,
// only the latest state waits (the last notice the agent reads says who holds it now).
TEST_F(Supervisor, SupervisorAttackControlTogglingCannotGrowAQueueThatIsNotRead) {
    ASSERT_NE(start_daemon(supervised_config()), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto agent = attach(id, /*observe=*/false);
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(expect_attached(*agent));
    auto supervisor = person(kAdm);
    ASSERT_NE(supervisor, nullptr);
    ASSERT_EQ(supervisor->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, true, false})), 0);
    ASSERT_TRUE(expect_attached(*supervisor));

    constexpr int kToggles = 20000;
    std::vector<std::uint8_t> toggles;
    for (int i = 0; i < kToggles; ++i) {
        const auto f = protocol::encode_frame(FrameType::Control, protocol::encode(protocol::ControlRequest{i % 2 == 0}));
        toggles.insert(toggles.end(), f.begin(), f.end());
    }
    // Ends taken: an odd count of frames would end handed back.
    const auto last = protocol::encode_frame(FrameType::Control, protocol::encode(protocol::ControlRequest{true}));
    toggles.insert(toggles.end(), last.begin(), last.end());
    // Then the person, who holds the terminal, types a mark: the daemon handles one client's
    // frames in order, so the mark's echo comes after every toggle has been handled.
    const std::string mark = "toggles-done";
    const auto typed = protocol::encode_frame(FrameType::Input, mark + "\n");
    toggles.insert(toggles.end(), typed.begin(), typed.end());
    // The supervisor's own notices are drained by a reader thread, until the mark comes back,
    // so that only the agent's queue is left unread.
    std::thread drain([&] {
        std::string seen;
        for (;;) {
            auto in = supervisor->next(Millis(30000));
            if (in.kind != Incoming::Kind::Frame) return;
            if (in.frame.type == FrameType::Output) seen.append(in.frame.text());
            if (seen.find(mark) != std::string::npos) return;
        }
    });
    ASSERT_EQ(supervisor->send(toggles), 0);
    drain.join();

    // The agent reads now: until the mark's echo, and a notice that says a person holds it.
    int notices = 0;
    std::optional<protocol::ControllerNotice> latest;
    std::string output;
    for (;;) {
        auto in = agent->next(Millis(30000));
        if (in.kind != Incoming::Kind::Frame) break;
        if (in.frame.type == FrameType::Output) output.append(in.frame.text());
        if (in.frame.type == FrameType::Controller) {
            ++notices;
            latest = protocol::decode_controller(in.frame.text()).value;
        }
        if (output.find(mark) != std::string::npos && latest &&
            latest->controller == protocol::ControllerNotice::Kind::Supervisor)
            break;
    }
    ASSERT_TRUE(latest);
    EXPECT_EQ(latest->controller, protocol::ControllerNotice::Kind::Supervisor);
    EXPECT_LT(notices, kToggles / 4) << "a notice per change was queued for a client that did not read";
}

}  // namespace
}  // namespace ptyvisor::itest
