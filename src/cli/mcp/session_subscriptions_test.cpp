// SessionSubscriptions against a fake daemon (a listening socket served by the test): the
// order of its requests, how replies become resources, and how WATCH's events become
// notifications. The real daemon is in integrations/mcp/notify.test.mjs.
#include "cli/mcp/session_subscriptions.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "cli/mcp/session_resources.h"
#include "common/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"

namespace ptyvisor::cli::mcp {
namespace {

using nlohmann::json;
using protocol::FrameType;

const std::string kId = "0123456789abcdef0123456789abcdef";

class FakeDaemon {
  public:
    FakeDaemon() {
        char dir_template[] = "/tmp/ptyvisor-mcp-subs.XXXXXX";
        dir_ = ::mkdtemp(dir_template);
        path_ = dir_ + "/sock";
        listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
        EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
        EXPECT_EQ(::listen(listener_.get(), 64), 0);
    }
    ~FakeDaemon() { std::filesystem::remove_all(dir_); }
    [[nodiscard]] const std::string& path() const { return path_; }

    // Accepts the next connection and reads its request.
    protocol::Frame accept_request(UniqueFd& connection) {
        connection.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        EXPECT_TRUE(connection.valid());
        protocol::FrameDecoder decoder;
        protocol::Frame frame;
        std::vector<std::uint8_t> buffer(64 * 1024);
        while (decoder.next(frame) != protocol::FrameDecoder::Status::Ready) {
            const ssize_t n = ::read(connection.get(), buffer.data(), buffer.size());
            if (n <= 0) {
                ADD_FAILURE() << "no request";
                return {};
            }
            decoder.feed(std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(n)));
        }
        return frame;
    }
    static void send(const UniqueFd& connection, FrameType type, std::string_view payload) {
        const auto bytes = protocol::encode_frame(type, payload);
        EXPECT_EQ(::write(connection.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    }

  private:
    std::string dir_;
    std::string path_;
    UniqueFd listener_;
};

class SessionSubscriptionsTest : public ::testing::Test {
  protected:
    SessionSubscriptionsTest()
        : subs(
              daemon.path(), [this](std::uint64_t call, const ResourceReply& r) { replies.emplace(call, r); },
              [this](const std::string& uri, std::string_view event) { updates.emplace_back(uri, event); }) {}

    // Runs the poll loop until `done()`; fails after 5 s.
    template <typename Done>
    void run_until(Done done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!done() && std::chrono::steady_clock::now() < deadline) {
            std::vector<pollfd> fds;
            std::vector<std::uint64_t> owners;
            subs.collect(fds, owners);
            if (::poll(fds.data(), fds.size(), 50) < 0) break;
            subs.dispatch(fds, 0, owners);
        }
        EXPECT_TRUE(done()) << "not within 5 s";
    }
    ResourceReply reply_of(std::uint64_t call) {
        run_until([&] { return replies.contains(call); });
        return replies.contains(call) ? replies.at(call) : ResourceReply::error(0, "none");
    }

    // Subscribes as call `call`: takes the WATCH and the probe, answers the probe.
    void subscribe(std::uint64_t call, UniqueFd& watch) {
        subs.subscribe(call, kId);
        EXPECT_EQ(daemon.accept_request(watch).type, FrameType::Watch);
        UniqueFd probe;
        const auto frame = daemon.accept_request(probe);
        EXPECT_EQ(frame.type, FrameType::Commands);
        EXPECT_EQ(frame.version, 4);
        protocol::CommandListReply list;
        list.id = kId;
        FakeDaemon::send(probe, FrameType::CommandList, protocol::encode(list));
        const auto r = reply_of(call);
        EXPECT_EQ(r.error_code, 0) << r.message;
    }
    static void event(const UniqueFd& watch, protocol::SessionEvent::Kind kind) {
        protocol::SessionEvent e;
        e.kind = kind;
        if (kind == protocol::SessionEvent::Kind::Exit)
            e.exit = protocol::ExitStatus{protocol::ExitStatus::Kind::Exited, 0, 0, false, "", protocol::ExitReason::Exited};
        if (kind == protocol::SessionEvent::Kind::CommandStart || kind == protocol::SessionEvent::Kind::CommandEnd) {
            e.command = protocol::CommandRecord{};
            e.command->seq = 1;
            if (kind == protocol::SessionEvent::Kind::CommandEnd) {
                e.command->output_end = 0;
                e.command->exit_code = 0;
                e.command->ended_ms = 0;
            }
        }
        FakeDaemon::send(watch, FrameType::Event, protocol::encode(e));
    }

    FakeDaemon daemon;
    std::map<std::uint64_t, ResourceReply> replies;
    std::vector<std::pair<std::string, std::string>> updates;
    SessionSubscriptions subs;
};

TEST_F(SessionSubscriptionsTest, EventsBecomeUpdatesUntilTheExit) {
    UniqueFd watch;
    subscribe(1, watch);
    EXPECT_EQ(subs.subscriptions(), 1u);
    using Kind = protocol::SessionEvent::Kind;
    event(watch, Kind::CommandStart);
    event(watch, Kind::CommandEnd);
    event(watch, Kind::Prompt);
    event(watch, Kind::Input);
    run_until([&] { return updates.size() >= 2; });
    event(watch, Kind::Exit);
    watch.reset();
    run_until([&] { return updates.size() >= 3 && subs.subscriptions() == 0; });
    const std::string uri = session_uri(kId);
    const std::vector<std::pair<std::string, std::string>> expected{
        {uri, "command_end"}, {uri, "input"}, {uri, "exit"}};
    EXPECT_EQ(updates, expected);
    EXPECT_EQ(subs.connections(), 0u);
}

TEST_F(SessionSubscriptionsTest, AnOldDaemonIsAClearErrorOnSubscribe) {
    subs.subscribe(1, kId);
    const protocol::ErrorReply refusal{protocol::ErrorCode::UnsupportedVersion, "version 4 is not spoken here"};
    UniqueFd watch;
    EXPECT_EQ(daemon.accept_request(watch).type, FrameType::Watch);
    FakeDaemon::send(watch, FrameType::Error, protocol::encode(refusal));
    UniqueFd probe;
    EXPECT_EQ(daemon.accept_request(probe).type, FrameType::Commands);
    FakeDaemon::send(probe, FrameType::Error, protocol::encode(refusal));
    const auto r = reply_of(1);
    EXPECT_EQ(r.error_code, kResourceInternalError);
    EXPECT_NE(r.message.find("protocol version 4"), std::string::npos) << r.message;
    EXPECT_EQ(subs.subscriptions(), 0u);
    run_until([&] { return subs.connections() == 0; });
}

TEST_F(SessionSubscriptionsTest, AnUnknownSessionIsNotFound) {
    subs.subscribe(1, kId);
    UniqueFd watch, probe;
    EXPECT_EQ(daemon.accept_request(watch).type, FrameType::Watch);
    EXPECT_EQ(daemon.accept_request(probe).type, FrameType::Commands);
    FakeDaemon::send(probe, FrameType::Error,
                     protocol::encode(protocol::ErrorReply{protocol::ErrorCode::NoSuchSession, "no such session"}));
    EXPECT_EQ(reply_of(1).error_code, kResourceNotFound);
    EXPECT_EQ(subs.connections(), 0u);
}

TEST_F(SessionSubscriptionsTest, SubscriptionsAreBounded) {
    std::vector<UniqueFd> held;
    for (std::uint64_t call = 1; call <= SessionSubscriptions::kMaxSubscriptions; ++call) {
        // Distinct sessions, pending: the bound counts them too.
        std::string id = kId;
        id[0] = "0123456789abcdef"[call % 16];
        id[1] = "0123456789abcdef"[call / 16];
        subs.subscribe(call, id);
    }
    EXPECT_TRUE(replies.empty());
    subs.subscribe(99, "ffffffffffffffffffffffffffffffff");
    ASSERT_TRUE(replies.contains(99));
    EXPECT_EQ(replies.at(99).error_code, kResourceInvalidParams);
    EXPECT_NE(replies.at(99).message.find("16"), std::string::npos);
}

TEST_F(SessionSubscriptionsTest, UnsubscribeClosesTheWatch) {
    UniqueFd watch;
    subscribe(1, watch);
    subs.unsubscribe(2, kId);
    ASSERT_TRUE(replies.contains(2));
    EXPECT_EQ(replies.at(2).error_code, 0);
    EXPECT_EQ(subs.subscriptions(), 0u);
    EXPECT_EQ(subs.connections(), 0u);
    char byte = 0;
    EXPECT_EQ(::read(watch.get(), &byte, 1), 0);  // the daemon sees the close
}

TEST_F(SessionSubscriptionsTest, AWatchTheDaemonEndsIsForgottenWithALastUpdate) {
    UniqueFd watch;
    subscribe(1, watch);
    FakeDaemon::send(watch, FrameType::Error,
                     protocol::encode(protocol::ErrorReply{protocol::ErrorCode::Busy, "the watcher fell behind"}));
    watch.reset();
    run_until([&] { return subs.subscriptions() == 0; });
    ASSERT_EQ(updates.size(), 1u);
    EXPECT_EQ(updates[0].second, "watch_ended");
}

TEST_F(SessionSubscriptionsTest, ReadJoinsListAndCommands) {
    subs.read(1, kId);
    UniqueFd list, commands;
    EXPECT_EQ(daemon.accept_request(list).type, FrameType::List);
    EXPECT_EQ(daemon.accept_request(commands).type, FrameType::Commands);
    protocol::SessionInfo info;
    info.id = kId;
    info.argv = {"bash"};
    FakeDaemon::send(list, FrameType::Sessions, protocol::encode(std::vector{info}));
    protocol::CommandListReply reply;
    reply.id = kId;
    reply.waiting_for_input = true;
    protocol::CommandRecord running;
    running.seq = 2;
    running.command = "read x";
    reply.current = running;
    FakeDaemon::send(commands, FrameType::CommandList, protocol::encode(reply));
    const auto r = reply_of(1);
    ASSERT_EQ(r.error_code, 0) << r.message;
    const json body = json::parse(r.result.at("contents").at(0).at("text").get<std::string>());
    EXPECT_EQ(body.at("waiting_for_input"), true);
    EXPECT_EQ(body.at("current_command").at("command"), "read x");
}

TEST_F(SessionSubscriptionsTest, ReadOfASessionNotListedIsNotFound) {
    subs.read(1, kId);
    UniqueFd list, commands;
    EXPECT_EQ(daemon.accept_request(list).type, FrameType::List);
    EXPECT_EQ(daemon.accept_request(commands).type, FrameType::Commands);
    FakeDaemon::send(list, FrameType::Sessions, protocol::encode(std::vector<protocol::SessionInfo>{}));
    FakeDaemon::send(commands, FrameType::Error,
                     protocol::encode(protocol::ErrorReply{protocol::ErrorCode::NoSuchSession, "none"}));
    EXPECT_EQ(reply_of(1).error_code, kResourceNotFound);
}

TEST_F(SessionSubscriptionsTest, ADaemonThatClosesWithoutAnswerIsAnError) {
    subs.list(1);
    UniqueFd list;
    EXPECT_EQ(daemon.accept_request(list).type, FrameType::List);
    list.reset();
    const auto r = reply_of(1);
    EXPECT_EQ(r.error_code, kResourceInternalError);
    EXPECT_NE(r.message.find("without an answer"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
