#include "screen/worker.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "server/output_log.h"

namespace ptyvisor::screen {
namespace {

struct Sent {
    MessageType type;
    std::vector<std::uint8_t> body;
};

class WorkerTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_EQ(server::OutputLog::create("worker-test", 64 * 1024, log), 0); }

    std::vector<Sent> sent;
    Worker worker{[this](std::vector<std::uint8_t> m) {
        split_messages(m, kMaxWorkerMessage, [&](MessageType t, std::span<const std::uint8_t> b) {
            sent.push_back({t, {b.begin(), b.end()}});
            return true;
        });
    }};
    std::unique_ptr<server::OutputLog> log;

    void append(std::string_view s) { log->append(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size())); }
    bool send(std::vector<std::uint8_t> m, std::vector<UniqueFd> fds = {}) {
        bool ok = true;
        split_messages(m, kMaxDaemonMessage, [&](MessageType t, std::span<const std::uint8_t> b) {
            ok = worker.handle(t, b, fds);
            return ok;
        });
        return ok;
    }
    bool open(std::uint32_t id, std::uint64_t from, std::uint64_t upto) {
        std::vector<UniqueFd> fds;
        fds.emplace_back(::open(("/proc/self/fd/" + std::to_string(log->fd())).c_str(), O_RDONLY | O_CLOEXEC));
        return send(Writer(MessageType::Open).put(id).put(std::uint64_t{log->capacity()}).put(from).put(upto)
                        .put(std::uint16_t{20}).put(std::uint16_t{3}).put(std::uint32_t{100}).finish(),
                    std::move(fds));
    }
    protocol::ScreenReply snapshot(std::uint32_t id) {
        sent.clear();
        EXPECT_TRUE(send(Writer(MessageType::Snapshot).put(std::uint32_t{7}).put(id).put(log->end())
                             .put(std::uint32_t{10}).put(std::uint8_t{0}).finish()));
        EXPECT_EQ(sent.size(), 1u);
        if (sent.empty()) return {};
        Reader r(sent[0].body);
        std::uint32_t ticket = 0, session = 0;
        EXPECT_TRUE(r.get(ticket) && r.get(session));
        EXPECT_EQ(ticket, 7u);
        const auto decoded = protocol::decode_screen(r.rest());
        EXPECT_TRUE(decoded) << decoded.error;
        return decoded ? *decoded.value : protocol::ScreenReply{};
    }
};

TEST_F(WorkerTest, ReplaysTheLogAndFollowsIt) {
    append("one\r\n\x1b[6n");
    ASSERT_TRUE(open(1, log->start(), log->end()));
    ASSERT_EQ(sent.size(), 1u);  // the replay's acknowledgement, without answers
    EXPECT_EQ(sent[0].type, MessageType::Advanced);
    EXPECT_EQ(sent[0].body.size(), 12u);
    EXPECT_EQ(snapshot(1).lines[0], "one");
    append("two\x1b[6n");
    sent.clear();
    ASSERT_TRUE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).put(log->end()).finish()));
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].type, MessageType::Advanced);
    Reader r(sent[0].body);
    std::uint32_t id = 0;
    std::uint64_t offset = 0;
    ASSERT_TRUE(r.get(id) && r.get(offset));
    EXPECT_EQ(offset, log->end());
    // Only the new query is answered: the replayed one was answered when it was new.
    EXPECT_EQ(r.rest(), "\x1b[2;4R");
    const auto s = snapshot(1);
    EXPECT_EQ(s.lines[1], "two");
    EXPECT_EQ(s.offset, log->end());
}

TEST_F(WorkerTest, SkipsWhatTheRingOverwrote) {
    ASSERT_TRUE(open(1, 0, 0));
    std::string big(log->capacity() + 100, 'x');
    append(big);
    append("\r\nlast");
    const auto s = snapshot(1);
    EXPECT_EQ(s.lines[2], "last");
}

TEST_F(WorkerTest, RefusesMalformedMessages) {
    EXPECT_FALSE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).finish()));
    EXPECT_FALSE(send(Writer(static_cast<MessageType>(77)).put(std::uint32_t{1}).finish()));
    // Open without a descriptor.
    EXPECT_FALSE(send(Writer(MessageType::Open).put(std::uint32_t{1}).put(std::uint64_t{4096}).put(std::uint64_t{0})
                          .put(std::uint64_t{0}).put(std::uint16_t{20}).put(std::uint16_t{3}).put(std::uint32_t{0}).finish()));
    // A snapshot of a session never opened.
    EXPECT_FALSE(send(Writer(MessageType::Snapshot).put(std::uint32_t{1}).put(std::uint32_t{9}).put(std::uint64_t{0})
                          .put(std::uint32_t{0}).put(std::uint8_t{0}).finish()));
}

TEST_F(WorkerTest, ResizeAppliesAfterTheBytesBeforeIt) {
    append("abcdefghij");
    ASSERT_TRUE(open(1, 0, log->end()));
    const auto at = log->end();
    append("\r\nk");
    ASSERT_TRUE(send(Writer(MessageType::Resize).put(std::uint32_t{1}).put(at).put(std::uint16_t{5}).put(std::uint16_t{4}).finish()));
    const auto s = snapshot(1);
    EXPECT_EQ(s.cols, 5);
    EXPECT_EQ(s.rows, 4);
}

// The Mark messages among `sent`, decoded; and each message's type, in order.
struct SentMark {
    std::uint32_t session = 0;
    std::uint8_t kind = 0;
    std::uint64_t offset = 0;
    std::int32_t exit_code = 0;
    std::string text;
};

std::vector<SentMark> marks_in(const std::vector<Sent>& sent) {
    std::vector<SentMark> marks;
    for (const Sent& m : sent) {
        if (m.type != MessageType::Mark) continue;
        Reader r(m.body);
        SentMark mark;
        EXPECT_TRUE(r.get(mark.session) && r.get(mark.kind) && r.get(mark.offset) && r.get(mark.exit_code));
        mark.text = r.rest();
        marks.push_back(mark);
    }
    return marks;
}

std::vector<MessageType> types_in(const std::vector<Sent>& sent) {
    std::vector<MessageType> types;
    for (const Sent& m : sent) types.push_back(m.type);
    return types;
}

constexpr auto kMark = MessageType::Mark, kAdvanced = MessageType::Advanced;

TEST_F(WorkerTest, SendsMarksBeforeTheAdvancedThatCoversThem) {
    ASSERT_TRUE(open(1, 0, 0));
    // Ill-formed UTF-8 before the marks (the emulator filters it; offsets are the log's),
    // a character cut by an ESC, and a mark cut across two Advances.
    append("\xff\xfe\xe2\x82\x1b]133;A\x07$ \x1b]133;B\x1b\\ls\r\n\x1b]133;C;cmdline_url=ls\x1b");
    const std::uint64_t prompt_end = 4 + 8, input_end = prompt_end + 2 + 9;
    const std::uint64_t output_start_end = log->end() + 1;
    sent.clear();
    ASSERT_TRUE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).put(log->end()).finish()));
    EXPECT_EQ(types_in(sent), (std::vector{kMark, kMark, kAdvanced}));
    append("\\file\r\n\x1b]133;D;1\x07\x1b]7;file://h/tmp\x07");
    const std::uint64_t end_start = output_start_end + 6;
    const auto first = marks_in(sent);
    sent.clear();
    ASSERT_TRUE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).put(log->end()).finish()));
    EXPECT_EQ(types_in(sent), (std::vector{kMark, kMark, kMark, kAdvanced}));
    const auto second = marks_in(sent);
    ASSERT_EQ(first.size(), 2u);
    ASSERT_EQ(second.size(), 3u);
    EXPECT_EQ(first[0].session, 1u);
    EXPECT_EQ(first[0].kind, 1);
    EXPECT_EQ(first[0].offset, prompt_end);
    EXPECT_EQ(first[0].exit_code, -1);
    EXPECT_EQ(first[1].kind, 2);
    EXPECT_EQ(first[1].offset, input_end);
    EXPECT_EQ(second[0].kind, 3);
    EXPECT_EQ(second[0].offset, output_start_end);
    EXPECT_EQ(second[0].text, "ls");
    EXPECT_EQ(second[1].kind, 4);
    EXPECT_EQ(second[1].offset, end_start);
    EXPECT_EQ(second[1].exit_code, 1);
    EXPECT_EQ(second[2].kind, 5);
    EXPECT_EQ(second[2].offset, log->end());
    EXPECT_EQ(second[2].text, "/tmp");
    EXPECT_EQ(snapshot(1).lines[1], "file");  // the screen saw the same bytes
}

TEST_F(WorkerTest, AReplayReportsItsMarksAgain) {
    append("\x1b]133;A\x07$ ");
    ASSERT_TRUE(open(1, log->start(), log->end()));
    EXPECT_EQ(types_in(sent), (std::vector{kMark, kAdvanced}));
    const auto marks = marks_in(sent);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0].offset, 8u);
}

TEST_F(WorkerTest, MarksFoundForASnapshotWaitForTheNextAdvanced) {
    ASSERT_TRUE(open(1, 0, 0));
    append("\x1b]133;A\x07");
    snapshot(1);  // processes the log to its end: the mark waits
    EXPECT_TRUE(marks_in(sent).empty());
    sent.clear();
    ASSERT_TRUE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).put(log->end()).finish()));
    EXPECT_EQ(types_in(sent), (std::vector{kMark, kAdvanced}));
}

TEST_F(WorkerTest, SendsAtMostTheNewestMarksPerReply) {
    ASSERT_TRUE(open(1, 0, 0));
    std::string flood;
    for (std::size_t i = 0; i < kMaxMarksPerReply + 50; ++i) flood += "\x1b]133;D;" + std::to_string(i % 256) + "\x07";
    append(flood);
    sent.clear();
    ASSERT_TRUE(send(Writer(MessageType::Advance).put(std::uint32_t{1}).put(log->end()).finish()));
    const auto marks = marks_in(sent);
    ASSERT_EQ(marks.size(), kMaxMarksPerReply);
    EXPECT_EQ(sent.back().type, kAdvanced);
    EXPECT_EQ(marks.back().offset, log->end() - std::string_view("\x1b]133;D;49\x07").size());
    EXPECT_EQ(marks.back().exit_code, 49);
    EXPECT_EQ(marks.front().exit_code, 50);  // the first 50 were dropped
    for (std::size_t i = 1; i < marks.size(); ++i) EXPECT_LT(marks[i - 1].offset, marks[i].offset);
}

}  // namespace
}  // namespace ptyvisor::screen
