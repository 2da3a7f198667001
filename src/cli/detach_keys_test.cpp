#include "cli/detach_keys.h"

#include <gtest/gtest.h>

namespace ptyvisor::cli {
namespace {

std::string keys_of(std::string_view spec) {
    std::string out = "untouched";
    std::string why;
    EXPECT_TRUE(parse_detach_keys(spec, out, why)) << spec << ": " << why;
    return out;
}

TEST(DetachKeys, DockerStyleSpecifications) {
    EXPECT_EQ(keys_of(kDefaultDetachKeys), "\x10\x11");
    EXPECT_EQ(keys_of("ctrl-a"), "\x01");
    EXPECT_EQ(keys_of("ctrl-z"), "\x1a");
    EXPECT_EQ(keys_of("ctrl-@"), std::string(1, '\0'));
    EXPECT_EQ(keys_of("ctrl-[,ctrl-\\,ctrl-],ctrl-^,ctrl-_"), "\x1b\x1c\x1d\x1e\x1f");
    EXPECT_EQ(keys_of("ctrl-P"), "\x10");
    EXPECT_EQ(keys_of("a,b,c"), "abc");
    EXPECT_EQ(keys_of("ctrl-x,q"), "\x18q");
    EXPECT_EQ(keys_of("ctrl-p,,"), "\x10,") << "a lone comma is a key";
    EXPECT_EQ(keys_of(""), "") << "no keys: never detach";
}

TEST(DetachKeys, MalformedSpecificationsAreRefusedWithTheCulprit) {
    for (const std::string bad : {"ctrl-", "ctrl-1", "ctrl-pq", "ab", "ctrl-p,", "alt-x", "ctrl-p,,ctrl"}) {
        std::string out = "untouched";
        std::string why;
        EXPECT_FALSE(parse_detach_keys(bad, out, why)) << bad;
        EXPECT_EQ(out, "untouched") << bad;
        EXPECT_NE(why.find(bad), std::string::npos) << why;
    }
}

TEST(DetachKeyFilter, PassesEverythingWhenTheSequenceNeverAppears) {
    DetachKeyFilter f("\x10\x11");
    std::string out;
    EXPECT_FALSE(f.feed("hello world\r", out));
    EXPECT_EQ(out, "hello world\r");
    EXPECT_TRUE(f.held().empty());
}

TEST(DetachKeyFilter, DetectsTheSequenceAndDropsItAndWhatFollows) {
    DetachKeyFilter f("\x10\x11");
    std::string out;
    EXPECT_TRUE(f.feed("ab\x10\x11" "cd", out));
    EXPECT_EQ(out, "ab");
}

TEST(DetachKeyFilter, TheSequenceMaySpanChunks) {
    DetachKeyFilter f("\x10\x11");
    std::string out;
    EXPECT_FALSE(f.feed("x\x10", out));
    EXPECT_EQ(out, "x") << "the first key is held until the next shows what it is";
    EXPECT_EQ(f.held(), "\x10");
    EXPECT_TRUE(f.feed("\x11", out));
    EXPECT_EQ(out, "x");
}

TEST(DetachKeyFilter, ABrokenSequenceIsPassedOnAsTyped) {
    DetachKeyFilter f("\x10\x11");
    std::string out;
    EXPECT_FALSE(f.feed("\x10", out));
    EXPECT_FALSE(f.feed("a", out));
    EXPECT_EQ(out, "\x10" "a") << "^P then a: both reach the session (bash's previous-history)";
    EXPECT_TRUE(f.held().empty());
    out.clear();
    EXPECT_FALSE(f.feed("\x10\x10", out));
    EXPECT_EQ(out, "\x10") << "the second ^P may still begin the sequence";
    EXPECT_TRUE(f.feed("\x11", out));
    EXPECT_EQ(out, "\x10");
}

TEST(DetachKeyFilter, OverlappingPrefixesAreFound) {
    DetachKeyFilter f("aab");
    std::string out;
    EXPECT_TRUE(f.feed("xaaab", out));
    EXPECT_EQ(out, "xa");
}

TEST(DetachKeyFilter, NoKeysNeverDetach) {
    DetachKeyFilter f("");
    std::string out;
    EXPECT_FALSE(f.feed("\x10\x11", out));
    EXPECT_EQ(out, "\x10\x11");
}

}  // namespace
}  // namespace ptyvisor::cli
