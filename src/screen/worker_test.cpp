#include "screen/worker.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/output_log.h"

namespace ptyvisor::screen {
namespace {

struct Sent {
    MessageType type;
    std::vector<std::uint8_t> body;
};

class WorkerTest : public ::testing::Test {
  public:
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
    protocol::ScreenReply snapshot(std::uint32_t id, bool attributes = false) {
        sent.clear();
        EXPECT_TRUE(send(Writer(MessageType::Snapshot).put(std::uint32_t{7}).put(id).put(log->end())
                             .put(std::uint32_t{10}).put(std::uint8_t{attributes}).finish()));
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

// Tells the worker that session `id`'s log ends at its end now; returns the answers its
// Advanced carried.
std::string advance(WorkerTest& t, std::uint32_t id) {
    t.sent.clear();
    EXPECT_TRUE(t.send(Writer(MessageType::Advance).put(id).put(t.log->end()).finish()));
    for (const Sent& m : t.sent) {
        if (m.type != MessageType::Advanced) continue;
        Reader r(m.body);
        std::uint32_t session = 0;
        std::uint64_t offset = 0;
        EXPECT_TRUE(r.get(session) && r.get(offset));
        if (session == id) return std::string(r.rest());
    }
    ADD_FAILURE() << "no Advanced for session " << id;
    return {};
}

bool resize(WorkerTest& t, std::uint32_t id, std::uint16_t cols, std::uint16_t rows) {
    return t.send(Writer(MessageType::Resize).put(id).put(t.log->end()).put(cols).put(rows).finish());
}

// Past the quiet period of every session, seen from the worker's clock.
Worker::Clock::time_point after_quiet() { return Worker::Clock::now() + Worker::kQuietPeriod + std::chrono::seconds(1); }

TEST_F(WorkerTest, AnIdleSessionHoldsNoEmulatorUntilItShowsSomething) {
    ASSERT_TRUE(open(1, 0, 0));
    EXPECT_EQ(worker.resident(), 0u);
    ASSERT_TRUE(resize(*this, 1, 30, 5));  // nothing shown yet: still none
    EXPECT_EQ(worker.resident(), 0u);
    const auto blank = snapshot(1);
    EXPECT_EQ(blank.cols, 30);
    EXPECT_EQ(blank.rows, 5);
    EXPECT_EQ(blank.lines, std::vector<std::string>(5));
    EXPECT_EQ(blank.cursor_row, 0);
    EXPECT_EQ(blank.cursor_col, 0);
    EXPECT_EQ(worker.resident(), 1u);  // a snapshot needs one
    EXPECT_EQ(worker.evict_quiet(Worker::Clock::now()), 0u);  // not yet quiet
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 1u);
    EXPECT_EQ(worker.resident(), 0u);
    EXPECT_EQ(snapshot(1), blank);
}

// Session 1 is evicted, session 2 (the same log, the same messages) is not: every screen
// and answer of the first must be the second's.
TEST_F(WorkerTest, ASnapshotBeforeAndAfterEvictionIsIdentical) {
    ASSERT_TRUE(open(1, 0, 0));
    ASSERT_TRUE(open(2, 0, 0));
    auto both = [&](auto&& step) { step(1), step(2); };
    // Scrollback, attributes, a wide character, a resize between two writes, a title, modes
    // (application cursor keys, bracketed paste, origin), the alternate screen with text on
    // both, a hidden cursor, a pen left bold and red, and a character cut between writes.
    for (int i = 0; i < 12; ++i) append("line " + std::to_string(i) + "\r\n");
    append("\x1b[7mreverse\x1b[m \xe7\x95\x8c\r\n");
    both([&](std::uint32_t id) { advance(*this, id); });
    both([&](std::uint32_t id) { ASSERT_TRUE(resize(*this, id, 14, 4)); });
    append("after resize\r\n\x1b]2;the title\x07\x1b[?1h\x1b[?2004h\x1b[?1049h\x1b[2;3Halt text\x1b[?25l\x1b[1;31m\xe2\x82");
    both([&](std::uint32_t id) { advance(*this, id); });
    const auto before = snapshot(1, true);
    EXPECT_TRUE(before.alternate);
    EXPECT_FALSE(before.cursor_visible);
    EXPECT_EQ(before.title, "the title");
    EXPECT_FALSE(before.scrollback.empty());
    ASSERT_EQ(worker.resident(), 2u);
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 2u);
    EXPECT_EQ(snapshot(2, true), before);  // 2 rebuilt by its snapshot; 1 left evicted
    ASSERT_EQ(worker.resident(), 1u);
    EXPECT_EQ(snapshot(1, true), before);
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 2u);
    // The rest of the character, the pen and the modes act on what comes next.
    append("\xac" "X\x1b[?1049l");
    EXPECT_EQ(advance(*this, 1), advance(*this, 2));
    append("\x1b[?1$p\x1b[?2004$p\x1b[?6$p\x1b[6n");
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 2u);
    const std::string answers = advance(*this, 1);
    EXPECT_EQ(answers, advance(*this, 2));
    // The cursor is back where 1049h saved it, on the primary screen.
    EXPECT_EQ(answers, "\x1b[?1;1$y\x1b[?2004;1$y\x1b[?6;2$y\x1b[4;1R");
    const auto primary = snapshot(1, true);
    EXPECT_EQ(primary, snapshot(2, true));
    EXPECT_FALSE(primary.alternate);
    EXPECT_EQ(primary.lines[2], "after resize");
}

TEST_F(WorkerTest, AQueryRightAfterEvictionIsAnsweredInOrder) {
    ASSERT_TRUE(open(1, 0, 0));
    append("ab\r\ncd");
    advance(*this, 1);
    ASSERT_EQ(worker.evict_quiet(after_quiet()), 1u);
    append("\x1b[6n" "e\x1b[c\x1b[6n");
    EXPECT_EQ(advance(*this, 1), "\x1b[2;3R\x1b[?1;2c\x1b[2;4R");
    EXPECT_EQ(worker.resident(), 1u);
}

TEST_F(WorkerTest, AnOverwrittenLogRebuildsAsARestartedWorkerDoes) {
    ASSERT_TRUE(open(1, 0, 0));
    append("\x1b[?1049hfull screen\r\n");
    advance(*this, 1);
    ASSERT_EQ(worker.evict_quiet(after_quiet()), 1u);
    // More than the log holds, before the worker sees any of it: the switch to the alternate
    // screen is gone from the log, as it is for a worker restarted now.
    append(std::string(log->capacity(), 'y') + "\r\nend");
    const auto rebuilt = snapshot(1);
    ASSERT_TRUE(open(2, log->start(), log->end()));
    EXPECT_EQ(rebuilt, snapshot(2));
    EXPECT_FALSE(rebuilt.alternate);
}

TEST_F(WorkerTest, ASessionPastHalfItsLogKeepsItsEmulator) {
    ASSERT_TRUE(open(1, 0, 0));
    append(std::string(log->capacity() / 2 + 1, 'z'));
    advance(*this, 1);
    EXPECT_TRUE(worker.sweep_due());
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 0u);
    EXPECT_EQ(worker.resident(), 1u);
    EXPECT_FALSE(worker.sweep_due());  // no timer for an emulator that must stay
}

TEST_F(WorkerTest, ASweepIsDueUntilEveryEvictableSessionIsGivenBack) {
    ASSERT_TRUE(open(1, 0, 0));
    EXPECT_FALSE(worker.sweep_due());  // nothing resident: an idle session costs no wake-up
    ASSERT_TRUE(resize(*this, 1, 30, 5));
    EXPECT_FALSE(worker.sweep_due());
    append("x");
    advance(*this, 1);
    EXPECT_TRUE(worker.sweep_due());
    EXPECT_EQ(worker.evict_quiet(Worker::Clock::now()), 0u);
    EXPECT_TRUE(worker.sweep_due());  // not quiet yet
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 1u);
    EXPECT_FALSE(worker.sweep_due());
}

TEST_F(WorkerTest, ASessionResizedPastItsHistoryKeepsItsEmulator) {
    ASSERT_TRUE(open(1, 0, 0));
    append("x");
    advance(*this, 1);
    for (std::size_t i = 0; i <= Worker::kMaxResizeHistory; ++i)
        ASSERT_TRUE(resize(*this, 1, static_cast<std::uint16_t>(10 + i % 2), 3));
    EXPECT_EQ(worker.evict_quiet(after_quiet()), 0u);
}

TEST_F(WorkerTest, ClosingAnEvictedOrResidentSessionKeepsTheCount) {
    ASSERT_TRUE(open(1, 0, 0));
    ASSERT_TRUE(open(2, 0, 0));
    append("x");
    advance(*this, 1);
    ASSERT_EQ(worker.resident(), 1u);
    ASSERT_TRUE(send(Writer(MessageType::Close).put(std::uint32_t{1}).finish()));
    ASSERT_TRUE(send(Writer(MessageType::Close).put(std::uint32_t{2}).finish()));
    EXPECT_EQ(worker.resident(), 0u);
    EXPECT_EQ(worker.sessions(), 0u);
}

// Seeded, so that a failure can be replayed: random writes of the pieces terminals are made
// of (text, wide and cut characters, cursor moves, scrolling, modes, the alternate screen,
// titles, queries, a reset), resizes between them, and the session evicted at random points;
// an emulator fed the same bytes and resizes, never evicted, is the reference. Answers agree
// at every step, screens at every tenth. REP (CSI Ps b) is among the pieces: this test found
// that libvterm 0.1.4 wrote past the row when it repeated a wide character into the last
// column (rep_expander.h), when REP still reached it.
TEST_F(WorkerTest, RandomOutputGivesTheSameScreenWithOrWithoutEviction) {
    static const char* const kPieces[] = {
        "hello ", "\xe7\x95\x8c", "\xe2\x82", "\xac", "e\xcc\x81", "\r\n", "\n", "\r", "\t", "\x08",
        "\x1b[H", "\x1b[5;3H", "\x1b[2J", "\x1b[K", "\x1b[3L", "\x1b[2M", "\x1b[4@", "\x1b[2P", "\x1b[3S", "\x1b[2T",
        "\x1b[2;5r", "\x1b[r", "\x1b[1;31;44m", "\x1b[7m", "\x1b[m", "\x1b[38;5;200m", "\x1b[?1049h", "\x1b[?1049l",
        "\x1b[?47h", "\x1b[?47l", "\x1b[?1h", "\x1b[?6h", "\x1b[?6l", "\x1b[?7l", "\x1b[?7h", "\x1b[?25l", "\x1b[?25h",
        "\x1b]2;t\x07", "\x1b]0;title two\x1b\\", "\x1b" "7", "\x1b" "8", "\x1b[?10", "49h", "\x1b[6n", "\x1b[c",
        "\x1b[?1$p", "\x1b(0lqk\x1b(B", "\x1b" "c", "\x1b[20X", "\x1b[10G", "\x1b[3b", "\x1b[b", "\x1b[20G", "\x1b[", "40b"};
    std::mt19937 random(31);
    ASSERT_TRUE(open(1, 0, 0));
    Emulator reference(20, 3, 100);  // open()'s size and scrollback
    std::size_t evictions = 0;
    for (int step = 0; step < 400; ++step) {
        std::string bytes;
        const int writes = static_cast<int>(random() % 8);
        for (int i = 0; i < writes; ++i) bytes += kPieces[random() % std::size(kPieces)];
        append(bytes);
        reference.feed(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
        if (random() % 5 == 0) {
            const auto cols = static_cast<std::uint16_t>(2 + random() % 30);
            const auto rows = static_cast<std::uint16_t>(1 + random() % 8);
            ASSERT_TRUE(resize(*this, 1, cols, rows));
            reference.resize(cols, rows);
        }
        ASSERT_EQ(advance(*this, 1), reference.take_answers()) << "step " << step;
        if (random() % 3 == 0) evictions += worker.evict_quiet(after_quiet());
        if (step % 10 == 9) {
            auto expected = reference.snapshot(10, true);
            expected.offset = log->end();
            ASSERT_EQ(snapshot(1, true), expected) << "step " << step;
        }
    }
    EXPECT_GT(evictions, 50u);  // the rebuild path was taken, often
}

// The attack (rep_expander.h): a wide character, autowrap off, the cursor in the last column
// of 20, a REP. libvterm 0.1.4 wrote the character's right half past the row: the worker died,
// for every session. Also cut byte by byte, each byte a write of its own, so that the REP is
// always split. The screen is what printing the character three times shows.
TEST_F(WorkerTest, AWideCharacterRepeatedIntoTheLastColumnDoesNotCrashTheWorker) {
    const std::string attack = "\xe7\x95\x8c\x1b[?7l\x1b[20G\x1b[3b";
    const std::string printed = "\xe7\x95\x8c\x1b[?7l\x1b[20G\xe7\x95\x8c\xe7\x95\x8c\xe7\x95\x8c";
    Emulator reference(20, 3, 100);  // open()'s size and scrollback
    reference.feed(std::span(reinterpret_cast<const std::uint8_t*>(printed.data()), printed.size()));
    auto expected = reference.snapshot(10, true);
    ASSERT_EQ(expected.lines[1], "\xe7\x95\x8c\xe7\x95\x8c\xe7\x95\x8c");  // libvterm moves a wide character
                                                                         // that does not fit to the next line

    ASSERT_TRUE(open(1, 0, 0));
    append(attack);
    advance(*this, 1);
    expected.offset = log->end();
    EXPECT_EQ(snapshot(1, true), expected);

    ASSERT_TRUE(open(2, log->end(), log->end()));
    for (const char byte : attack) {
        append(std::string_view(&byte, 1));
        advance(*this, 2);
    }
    expected.offset = log->end();
    EXPECT_EQ(snapshot(2, true), expected);
}

}  // namespace
}  // namespace ptyvisor::screen
