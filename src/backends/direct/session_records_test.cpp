#include "backends/direct/session_records.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <algorithm>
#include <fstream>

namespace ptyvisor::backends::direct {
namespace {

class Records : public ::testing::Test {
protected:
    void SetUp() override {
        char dir[] = "/tmp/ptyvisor-records-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        root_ = dir;
    }
    void TearDown() override { std::filesystem::remove_all(root_); }
    std::string root_;
};

TEST_F(Records, WriteListRemove) {
    SessionRecords records(root_ + "/state");
    ASSERT_EQ(records.prepare(), 0);
    ASSERT_EQ(records.write({"a.service", "/sys/fs/cgroup/x/a.service", 0, 0}), 0);
    ASSERT_EQ(records.write({"b.service", "", 1234, 987654}), 0);
    auto list = records.list();
    ASSERT_EQ(list.size(), 2u);
    std::sort(list.begin(), list.end(), [](auto& l, auto& r) { return l.unit < r.unit; });
    EXPECT_EQ(list[0].cgroup, "/sys/fs/cgroup/x/a.service");
    EXPECT_EQ(list[1].leader, 1234);
    EXPECT_EQ(list[1].start_time, 987654u);
    records.remove("a.service");
    EXPECT_EQ(records.list().size(), 1u);
}

TEST_F(Records, TornRecordStillNamesItsUnit) {
    SessionRecords records(root_ + "/state");
    ASSERT_EQ(records.prepare(), 0);
    std::ofstream(root_ + "/state/sessions/c.service") << "cgroup=/sys/fs/cgroup/x/c";
    const auto list = records.list();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].unit, "c.service");
    EXPECT_EQ(list[0].cgroup, "/sys/fs/cgroup/x/c");
}

TEST(ProcessStartTime, KnowsOurselvesAndNotTheDead) {
    EXPECT_TRUE(process_start_time(::getpid()).has_value());
    EXPECT_FALSE(process_start_time(0x7ffffff0).has_value());
}

}  // namespace
}  // namespace ptyvisor::backends::direct
