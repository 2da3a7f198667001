// DaemonRunner against a fake daemon: a listening socket served by the test with the protocol
// library, to check what a real daemon rarely does (go away mid-call, refuse) and how a
// reply becomes a tool result. The real daemon is in integrations/mcp/.
#include "cli/mcp/daemon_runner.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "protocol/screen_payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::cli::mcp {
namespace {

using protocol::FrameType;

const std::string kId = "0123456789abcdef0123456789abcdef";

class FakeDaemon {
  public:
    FakeDaemon() {
        char dir_template[] = "/tmp/ptyvisor-mcp-test.XXXXXX";
        dir_ = ::mkdtemp(dir_template);
        path_ = dir_ + "/sock";
        listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
        EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
        EXPECT_EQ(::listen(listener_.get(), 8), 0);
    }
    ~FakeDaemon() { std::filesystem::remove_all(dir_); }

    [[nodiscard]] const std::string& path() const { return path_; }

    // Accepts the next connection and reads its first frame (the request).
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

    static void reply(const UniqueFd& connection, FrameType type, std::string_view payload) {
        const auto bytes = protocol::encode_frame(type, payload);
        EXPECT_EQ(::write(connection.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    }

  private:
    std::string dir_;
    std::string path_;
    UniqueFd listener_;
};

class DaemonRunnerTest : public ::testing::Test {
  protected:
    DaemonRunnerTest()
        : runner(daemon.path(), [this](std::uint64_t call, const ToolResult& r) { results.emplace(call, r); }) {}

    // Runs the poll loop until call `key` has a result; fails after 5 s.
    ToolResult result_of(std::uint64_t key) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!results.contains(key) && std::chrono::steady_clock::now() < deadline) {
            std::vector<pollfd> fds;
            std::vector<std::uint64_t> owners;
            runner.collect(fds, owners);
            if (::poll(fds.data(), fds.size(), 100) < 0) break;
            runner.dispatch(fds, 0, owners);
        }
        EXPECT_TRUE(results.contains(key)) << "no result within 5 s";
        return results.contains(key) ? results.at(key) : ToolResult::error("none");
    }

    // Takes the request the runner sent, which must be of type `expected`, and refuses it.
    void refuse_next(FrameType expected, protocol::ErrorCode code, const std::string& message) {
        UniqueFd connection;
        EXPECT_EQ(daemon.accept_request(connection).type, expected);
        FakeDaemon::reply(connection, FrameType::Error, protocol::encode(protocol::ErrorReply{code, message}));
    }

    FakeDaemon daemon;
    std::map<std::uint64_t, ToolResult> results;
    DaemonRunner runner;
};

TEST_F(DaemonRunnerTest, ListBecomesStructuredSessions) {
    runner.start(1, ListArgs{});
    UniqueFd connection;
    EXPECT_EQ(daemon.accept_request(connection).type, FrameType::List);
    protocol::SessionInfo info;
    info.id = kId;
    info.argv = {"sleep", "9"};
    info.state = protocol::State::Exited;
    info.exit = protocol::ExitStatus{protocol::ExitStatus::Kind::Exited, 3, 0, false, "", protocol::ExitReason::Exited};
    FakeDaemon::reply(connection, FrameType::Sessions, protocol::encode(std::vector{info}));
    connection.reset();
    const auto r = result_of(1);
    ASSERT_FALSE(r.is_error) << r.message;
    const auto& s = r.structured.at("sessions").at(0);
    EXPECT_EQ(s.at("id"), kId);
    EXPECT_EQ(s.at("state"), "exited");
    EXPECT_EQ(s.at("exit").at("code"), 3);
}

TEST_F(DaemonRunnerTest, ADaemonThatClosesWithoutAnswerIsAToolError) {
    runner.start(1, KillArgs{kId, 0});
    UniqueFd connection;
    EXPECT_EQ(daemon.accept_request(connection).type, FrameType::Kill);
    connection.reset();
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.message, "connection to ptyvisord lost");
}

TEST_F(DaemonRunnerTest, ARefusalIsAToolErrorWithTheDaemonsReason) {
    WriteArgs write{kId, "x"};
    runner.start(1, write);
    refuse_next(FrameType::Send, protocol::ErrorCode::NoSuchSession, "no such session");
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.message, "ptyvisord refused: no such session (no_such_session)");
}

TEST_F(DaemonRunnerTest, ACancelledCallIsNeverAnswered) {
    WaitArgs wait;
    wait.request.id = kId;
    runner.start(1, wait);
    UniqueFd connection;
    EXPECT_EQ(daemon.accept_request(connection).type, FrameType::Wait);
    runner.cancel(1);
    std::vector<pollfd> fds;
    std::vector<std::uint64_t> owners;
    runner.collect(fds, owners);
    EXPECT_TRUE(fds.empty());
    EXPECT_EQ(runner.poll_timeout_ms(), -1);
    // The daemon sees the connection close.
    char byte;
    EXPECT_EQ(::read(connection.get(), &byte, 1), 0);
    EXPECT_TRUE(results.empty());
}

TEST_F(DaemonRunnerTest, WhenTheClientClosesALongWaitIsAbandonedWithinTheGrace) {
    WaitArgs wait;
    wait.request.id = kId;
    wait.request.timeout_ms = 600'000;
    runner.start(1, wait);
    UniqueFd connection;
    EXPECT_EQ(daemon.accept_request(connection).type, FrameType::Wait);
    runner.limit_deadlines(std::chrono::milliseconds(0));
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.message, "abandoned: the MCP client closed its input");
}

TEST_F(DaemonRunnerTest, ReadContinuesWhereTheLastReadStoppedAndHoldsBackASplitSequence) {
    ReadArgs read;
    read.id = kId;
    runner.start(1, read);
    UniqueFd connection;
    const auto request = daemon.accept_request(connection);
    EXPECT_EQ(request.type, FrameType::Read);
    const auto asked = protocol::decode_read(
        std::string_view(reinterpret_cast<const char*>(request.payload.data()), request.payload.size()));
    ASSERT_TRUE(asked) << asked.error;
    EXPECT_EQ(asked.value->from, (protocol::LogPosition{protocol::LogPosition::Kind::Offset, 0}));
    const std::string bytes = "ok\r\n\x1b[3";
    protocol::LogReply log{kId, 0, 0, bytes.size(), bytes.size(), protocol::State::Running, std::nullopt};
    FakeDaemon::reply(connection, FrameType::Log, protocol::encode(log));
    FakeDaemon::reply(connection, FrameType::Output, bytes);
    connection.reset();
    const auto r = result_of(1);
    ASSERT_FALSE(r.is_error) << r.message;
    EXPECT_EQ(r.structured.at("text"), "ok\n");
    EXPECT_EQ(r.structured.at("next_offset"), 4);
    EXPECT_EQ(r.structured.at("more"), false);

    runner.start(2, read);
    const auto again = daemon.accept_request(connection);
    const auto next = protocol::decode_read(
        std::string_view(reinterpret_cast<const char*>(again.payload.data()), again.payload.size()));
    ASSERT_TRUE(next) << next.error;
    EXPECT_EQ(next.value->from, (protocol::LogPosition{protocol::LogPosition::Kind::Offset, 4}));
}

// The log arrives in several OUTPUT frames; the text is what the terminal showed, in the budget.
TEST_F(DaemonRunnerTest, ReadCondensesProgressAndLeavesOutTheMiddleOfLongOutput) {
    std::string bytes = "npm \x1b[32minstall\x1b[0m\r\n";
    for (int i = 0; i <= 100; ++i) bytes += "\r\x1b[K" + std::to_string(i) + "%";
    bytes += "\r\n";
    for (int i = 0; i < 2000; ++i) bytes += "added package-" + std::to_string(i) + "\r\n";
    ReadArgs read;
    read.id = kId;
    read.max_bytes = 2000;
    runner.start(1, read);
    UniqueFd connection;
    const auto request = daemon.accept_request(connection);
    const auto asked = protocol::decode_read(
        std::string_view(reinterpret_cast<const char*>(request.payload.data()), request.payload.size()));
    ASSERT_TRUE(asked) << asked.error;
    EXPECT_EQ(asked.value->max_bytes, kReadWindowBytes);
    protocol::LogReply log{kId, 0, 0, bytes.size(), bytes.size(), protocol::State::Exited, std::nullopt};
    FakeDaemon::reply(connection, FrameType::Log, protocol::encode(log));
    for (std::size_t at = 0; at < bytes.size(); at += 1000)
        FakeDaemon::reply(connection, FrameType::Output, std::string_view(bytes).substr(at, 1000));
    connection.reset();
    const auto r = result_of(1);
    ASSERT_FALSE(r.is_error) << r.message;
    const std::string text = r.structured.at("text");
    EXPECT_LE(text.size(), 2000u);
    EXPECT_EQ(text.rfind("npm install\n100%\nadded package-0\n", 0), 0u) << text;
    EXPECT_EQ(text.substr(text.size() - 19), "added package-1999\n");
    EXPECT_EQ(r.structured.at("truncated"), true);
    const std::uint64_t from = r.structured.at("omitted_from"), to = r.structured.at("omitted_to");
    EXPECT_NE(text.find("read them with terminal_read offset=" + std::to_string(from) + " to=" + std::to_string(to)),
              std::string::npos);
    EXPECT_EQ(bytes.substr(from, 15), "added package-4");  // lines start where the marker says
    EXPECT_EQ(r.structured.at("next_offset"), bytes.size());
    EXPECT_EQ(r.structured.at("more"), false);

    // The range the marker gives, in order: a page of at most max_bytes, from its start.
    read.offset = from;
    read.to = to;
    runner.start(2, read);
    const auto again = daemon.accept_request(connection);
    const auto page = protocol::decode_read(
        std::string_view(reinterpret_cast<const char*>(again.payload.data()), again.payload.size()));
    ASSERT_TRUE(page) << page.error;
    EXPECT_EQ(page.value->from, (protocol::LogPosition{protocol::LogPosition::Kind::Offset, from}));
    EXPECT_EQ(page.value->max_bytes, to - from);
    const std::string range = bytes.substr(from, to - from);
    protocol::LogReply part{kId, 0, from, range.size(), bytes.size(), protocol::State::Exited, std::nullopt};
    FakeDaemon::reply(connection, FrameType::Log, protocol::encode(part));
    FakeDaemon::reply(connection, FrameType::Output, range);
    connection.reset();
    const auto p = result_of(2);
    ASSERT_FALSE(p.is_error) << p.message;
    const std::string first = p.structured.at("text");
    EXPECT_EQ(first.rfind("added package-4", 0), 0u) << first;
    EXPECT_LE(first.size(), 2000u);
    EXPECT_GT(first.size(), 1900u);
    EXPECT_EQ(p.structured.at("truncated"), false);
    EXPECT_EQ(p.structured.at("more"), true);
    const std::uint64_t next = p.structured.at("next_offset");
    EXPECT_EQ(bytes.substr(next, 14), "added package-");  // a page ends at a line's end
}

TEST_F(DaemonRunnerTest, NoDaemonIsAToolErrorAtOnce) {
    DaemonRunner nowhere("/nonexistent/ptyvisor.sock",
                         [this](std::uint64_t call, const ToolResult& r) { results.emplace(call, r); });
    nowhere.start(7, ListArgs{});
    ASSERT_TRUE(results.contains(7));
    EXPECT_TRUE(results.at(7).is_error);
    EXPECT_NE(results.at(7).message.find("cannot reach ptyvisord"), std::string::npos);
}

TEST_F(DaemonRunnerTest, ScreenSendsTheSnapshotAndShowsTheRowsAsText) {
    runner.start(1, ScreenArgs{kId, 5, true});
    UniqueFd connection;
    const auto request = daemon.accept_request(connection);
    EXPECT_EQ(request.type, FrameType::Snapshot);
    const auto asked = protocol::decode_snapshot(
        std::string_view(reinterpret_cast<const char*>(request.payload.data()), request.payload.size()));
    ASSERT_TRUE(asked) << asked.error;
    EXPECT_EQ(*asked.value, (protocol::SnapshotRequest{kId, 5, true}));
    protocol::ScreenReply screen;
    screen.id = kId;
    screen.cols = 10;
    screen.rows = 2;
    screen.cursor_row = 1;
    screen.cursor_col = 3;
    screen.title = "top";
    screen.offset = 42;
    screen.lines = {"hello", "$ x"};
    screen.scrollback = {"before"};
    protocol::AttributeRun bold;
    bold.width = 5;
    bold.bold = true;
    screen.attributes = std::vector{bold};
    FakeDaemon::reply(connection, FrameType::Screen, protocol::encode(screen));
    connection.reset();
    const auto r = result_of(1);
    ASSERT_FALSE(r.is_error) << r.message;
    EXPECT_EQ(r.structured.at("lines"), (nlohmann::json{"hello", "$ x"}));
    EXPECT_EQ(r.structured.at("cursor").at("col"), 3);
    EXPECT_EQ(r.structured.at("offset"), 42);
    EXPECT_EQ(r.structured.at("attributes").size(), 1u);
    // The text the model reads, rather than the JSON.
    EXPECT_NE(r.message.find("cursor: row 1, col 3\n"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("\n-1|before\n 0|hello\n 1|$ x\n"), std::string::npos) << r.message;
    EXPECT_EQ(tool_result_json(r).at("content").at(0).at("text"), r.message);
    EXPECT_EQ(tool_result_json(r).at("structuredContent"), r.structured);
}

TEST_F(DaemonRunnerTest, ScreenOfAnUnknownSessionIsTheDaemonsRefusal) {
    runner.start(1, ScreenArgs{kId});
    refuse_next(FrameType::Snapshot, protocol::ErrorCode::NoSuchSession, "no such session");
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.message, "ptyvisord refused: no such session (no_such_session)");
}

TEST_F(DaemonRunnerTest, ScreenWithoutAWorkerSaysToAskAgain) {
    runner.start(1, ScreenArgs{kId});
    refuse_next(FrameType::Snapshot, protocol::ErrorCode::Internal, "the screen is unavailable");
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_NE(r.message.find("call terminal_screen again"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("the screen is unavailable (internal)"), std::string::npos) << r.message;
}

TEST_F(DaemonRunnerTest, ScreenFromADaemonBeforeVersion3SaysSo) {
    runner.start(1, ScreenArgs{kId});
    refuse_next(FrameType::Snapshot, protocol::ErrorCode::UnsupportedVersion, "version 3");
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_NE(r.message.find("does not offer screen snapshots"), std::string::npos) << r.message;
}

TEST_F(DaemonRunnerTest, ScreenCutShortIsAToolError) {
    runner.start(1, ScreenArgs{kId});
    UniqueFd connection;
    EXPECT_EQ(daemon.accept_request(connection).type, FrameType::Snapshot);
    connection.reset();
    const auto r = result_of(1);
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.message, "connection to ptyvisord lost before the screen arrived");
}

}  // namespace
}  // namespace ptyvisor::cli::mcp
