// The event helpers name every source after the place that added it.
#include "common/event.h"

#include <gtest/gtest.h>

#include <string>

namespace ptyvisor {
namespace {

std::string description(const EventSource& source) {
    const char* name = nullptr;
    if (sd_event_source_get_description(source.get(), &name) < 0 || !name) return {};
    return name;
}

TEST(EventSourceNames, EachSourceIsNamedAfterTheLineThatAddedIt) {
    sd_event* raw = nullptr;
    ASSERT_GE(sd_event_new(&raw), 0);
    EventLoop loop(raw);
    EventSource timer, defer;
    const int timer_line = __LINE__ + 1;
    ASSERT_GE(add_timer(raw, timer, 1'000'000, [] {}), 0);
    const int defer_line = __LINE__ + 1;
    ASSERT_GE(add_defer(raw, defer, [] {}), 0);
    EXPECT_EQ(description(timer), "event_test.cpp:" + std::to_string(timer_line));
    EXPECT_EQ(description(defer), "event_test.cpp:" + std::to_string(defer_line));
}

TEST(EventSourceNames, DescribeSourceGivesANameOfItsOwn) {
    sd_event* raw = nullptr;
    ASSERT_GE(sd_event_new(&raw), 0);
    EventLoop loop(raw);
    EventSource timer;
    ASSERT_GE(add_timer(raw, timer, 1'000'000, [] {}), 0);
    describe_source(timer, "terminal 0123");
    EXPECT_EQ(description(timer), "terminal 0123");
}

}  // namespace
}  // namespace ptyvisor
