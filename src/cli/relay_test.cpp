#include "cli/relay.h"

#include <gtest/gtest.h>

namespace ptyvisor::cli {
namespace {

TEST(EndOfInput, OneControlDAtLineStartTwoAfterAPartialLine) {
    EXPECT_EQ(end_of_input(std::nullopt), "\x04");
    EXPECT_EQ(end_of_input('\n'), "\x04");
    EXPECT_EQ(end_of_input('c'), "\x04\x04");
}

}  // namespace
}  // namespace ptyvisor::cli
