#include "server/wait_condition.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace ptyvisor::server {
namespace {

std::unique_ptr<OutputLog> log_of(const std::string& text) {
    std::unique_ptr<OutputLog> log;
    EXPECT_EQ(OutputLog::create("wait-condition-test", 8u << 20, log), 0);
    log->append(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    return log;
}

WaitCondition waiting_for(const std::string& pattern) {
    WaitCondition w;
    w.request.what = protocol::WaitRequest::For::Text;
    w.request.pattern = pattern;
    std::string why;
    EXPECT_TRUE(w.compile(why)) << why;
    return w;
}

// Searches until the condition says Match or Nothing; returns how many turns it took.
int search_to_the_end(WaitCondition& w, const OutputLog& log, WaitCondition::Found& last) {
    int turns = 0;
    do {
        last = w.search(log, 0);
        ++turns;
    } while (last == WaitCondition::Found::More && turns < 100000);
    return turns;
}

TEST(WaitCondition, AMatchAtTheEndOfALongLogIsFoundOverSeveralTurns) {
    const std::string text = std::string(3u << 20, 'x') + "listening on port 8080\n";
    const auto log = log_of(text);
    auto w = waiting_for("listening on port [0-9]+");
    WaitCondition::Found last{};
    const int turns = search_to_the_end(w, *log, last);
    ASSERT_EQ(last, WaitCondition::Found::Match);
    EXPECT_GT(turns, 1) << "3 MiB searched in one turn";
    EXPECT_EQ(w.match_start, 3u << 20);
    EXPECT_EQ(w.match_end, (3u << 20) + std::strlen("listening on port 8080"));
}

TEST(WaitCondition, AMatchAcrossTwoSlicesIsFound) {
    // The first slice is kFirstSlice bytes: put a match across its end.
    const std::size_t at = WaitCondition::kFirstSlice - 5;
    const std::string text = std::string(at, '.') + "READY-NOW" + std::string(4096, '.');
    const auto log = log_of(text);
    auto w = waiting_for("READY-NOW");
    WaitCondition::Found last{};
    search_to_the_end(w, *log, last);
    ASSERT_EQ(last, WaitCondition::Found::Match);
    EXPECT_EQ(w.match_start, at);
}

TEST(WaitCondition, NothingOnceEveryByteHasBeenSearched) {
    const auto log = log_of(std::string(100000, 'y'));
    auto w = waiting_for("z");
    WaitCondition::Found last{};
    search_to_the_end(w, *log, last);
    EXPECT_EQ(last, WaitCondition::Found::Nothing);
    EXPECT_EQ(w.scanned, log->end());
}

TEST(WaitCondition, ACostlyPatternGetsSmallerSlices) {
    // Random a/b text under a[ab]{200}c: RE2's DFA gives up and each byte costs the NFA.
    std::string text(1u << 20, 'a');
    std::uint32_t seed = 12345;
    for (char& c : text) {
        seed = seed * 1103515245u + 12345u;
        c = (seed >> 16) & 1 ? 'a' : 'b';
    }
    const auto log = log_of(text);
    auto w = waiting_for("a[ab]{200}c");
    for (int i = 0; i < 20 && w.scanned < log->end(); ++i) w.search(*log, 0);
    EXPECT_LT(w.slice, WaitCondition::kMaxSlice) << "the slice grew to its largest on a costly pattern";
}

TEST(WaitCondition, APatternWithTooLargeAProgramIsRefused) {
    WaitCondition w;
    w.request.pattern = "a[ab]{999}c|b[ab]{999}d";
    std::string why;
    EXPECT_FALSE(w.compile(why));
    EXPECT_NE(why.find("too complex"), std::string::npos) << why;
}

}  // namespace
}  // namespace ptyvisor::server
