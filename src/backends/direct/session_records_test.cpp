#include "backends/direct/session_records.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ptyvisor::backends::direct {
namespace {

const std::string kRoot = "/sys/fs/cgroup/ptyvisor.sessions/instance-0123456789abcdef";
const std::string kUnitA = "ptyvisor-0123456789abcdef0123456789abcdef.service";
const std::string kUnitB = "ptyvisor-fedcba9876543210fedcba9876543210.service";

class Records : public ::testing::Test {
protected:
    void SetUp() override {
        char dir[] = "/tmp/ptyvisor-records-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        root_ = dir;
    }
    void TearDown() override { std::filesystem::remove_all(root_); }

    SessionRecords prepared() {
        SessionRecords records(root_ + "/state", {"ptyvisor", kRoot});
        EXPECT_EQ(records.prepare(), 0);
        return records;
    }
    std::string sessions() const { return root_ + "/state/sessions"; }
    void plant(const std::string& name, const std::string& text) const {
        std::ofstream(sessions() + "/" + name) << text;
    }
    static bool exists(const std::string& path) {
        struct stat st{};
        return ::lstat(path.c_str(), &st) == 0;
    }
    // What DirectBackend::cleanup_orphans does with every record it is given.
    static std::vector<SessionRecord> clean_up(const SessionRecords& records) {
        auto list = records.list();
        for (const auto& r : list) records.remove(r.unit);
        return list;
    }
    std::string root_;
};

TEST_F(Records, WriteListRemove) {
    auto records = prepared();
    ASSERT_EQ(records.write({kUnitA, kRoot + "/" + kUnitA, 0, 0}), 0);
    ASSERT_EQ(records.write({kUnitB, "", 1234, 987654}), 0);
    auto list = records.list();
    ASSERT_EQ(list.size(), 2u);
    std::sort(list.begin(), list.end(), [](auto& l, auto& r) { return l.unit < r.unit; });
    EXPECT_EQ(list[0].cgroup, kRoot + "/" + kUnitA);
    EXPECT_EQ(list[1].leader, 1234);
    EXPECT_EQ(list[1].start_time, 987654u);
    records.remove(kUnitA);
    EXPECT_EQ(records.list().size(), 1u);
}

TEST_F(Records, DirectoriesArePrivate) {
    prepared();
    struct stat st{};
    ASSERT_EQ(::stat(sessions().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// A record with unit=../../victim: cleanup removed "<dir>/<unit>", i.e. any file root can.
TEST_F(Records, RecordWithTraversalUnitNameIsNotFollowed) {
    auto records = prepared();
    const std::string victim = root_ + "/victim";
    std::ofstream(victim) << "precious";
    plant(kUnitA, "unit=../../victim\ncgroup=\nleader=1234\nstart_time=5\n");
    EXPECT_TRUE(clean_up(records).empty());
    EXPECT_TRUE(exists(victim)) << "cleanup deleted a file outside the records directory";
    EXPECT_FALSE(exists(sessions() + "/" + kUnitA)) << "the invalid record stays";
}

// A record naming a cgroup outside our instance: cleanup wrote cgroup.kill there.
TEST_F(Records, RecordWithForeignCgroupIsNotKilled) {
    auto records = prepared();
    plant(kUnitA, "unit=" + kUnitA + "\ncgroup=/sys/fs/cgroup/system.slice/sshd.service\nleader=0\nstart_time=0\n");
    plant(kUnitB, "unit=" + kUnitB + "\ncgroup=" + kRoot + "/../../system.slice\nleader=0\nstart_time=0\n");
    EXPECT_TRUE(clean_up(records).empty()) << "a foreign cgroup would be killed";
    EXPECT_FALSE(exists(sessions() + "/" + kUnitA));
    EXPECT_FALSE(exists(sessions() + "/" + kUnitB));
}

// A symlink in the records directory pointing at a record-shaped file elsewhere.
TEST_F(Records, RecordSymlinkIsNotFollowed) {
    auto records = prepared();
    const std::string elsewhere = root_ + "/elsewhere";
    std::ofstream(elsewhere) << "unit=" << kUnitA << "\ncgroup=" << kRoot << "/" << kUnitA
                             << "\nleader=0\nstart_time=0\n";
    ASSERT_EQ(::symlink(elsewhere.c_str(), (sessions() + "/" + kUnitA).c_str()), 0);
    EXPECT_TRUE(clean_up(records).empty());
    EXPECT_TRUE(exists(elsewhere)) << "the symlink's target went";
    EXPECT_FALSE(exists(sessions() + "/" + kUnitA)) << "the symlink stays";
}

// leader=1 without a cgroup: cleanup sent kill(-1, SIGKILL), every process there is.
TEST_F(Records, RecordWithLeaderOneIsNotSignalled) {
    auto records = prepared();
    plant(kUnitA, "unit=" + kUnitA + "\ncgroup=\nleader=1\nstart_time=1\n");
    plant(kUnitB, "unit=" + kUnitB + "\ncgroup=\nleader=-1\nstart_time=1\n");
    EXPECT_TRUE(clean_up(records).empty());
}

TEST_F(Records, MalformedRecordsAreRemovedNotActedOn) {
    auto records = prepared();
    const std::string ok = "unit=" + kUnitA + "\ncgroup=\nleader=1234\nstart_time=5\n";
    plant(kUnitA, ok + "leader=1\n");                            // a key twice
    plant(kUnitB, "cgroup=" + kRoot + "/" + kUnitB + "\n");       // torn: no unit, no leader
    plant("ptyvisor-00000000000000000000000000000000.service",
          "unit=ptyvisor-00000000000000000000000000000000.service\ncgroup=\nleader=12x\nstart_time=5\n");
    plant("leftover.tmp", ok);                                   // not a record's name
    EXPECT_TRUE(clean_up(records).empty());
    EXPECT_TRUE(std::filesystem::is_empty(sessions()));
}

TEST_F(Records, RecordsDirectoryWritableByOthersIsRefused) {
    ASSERT_EQ(::mkdir((root_ + "/state").c_str(), 0700), 0);
    ASSERT_EQ(::chmod((root_ + "/state").c_str(), 0777), 0);
    SessionRecords records(root_ + "/state", {"ptyvisor", kRoot});
    EXPECT_EQ(records.prepare(), -EPERM);
}

TEST_F(Records, SymlinkedStateDirectoryIsRefused) {
    ASSERT_EQ(::mkdir((root_ + "/real").c_str(), 0700), 0);
    ASSERT_EQ(::symlink((root_ + "/real").c_str(), (root_ + "/state").c_str()), 0);
    SessionRecords records(root_ + "/state", {"ptyvisor", kRoot});
    EXPECT_NE(records.prepare(), 0);
    EXPECT_FALSE(exists(root_ + "/real/sessions"));
}

TEST(RecordRules, OnlyWhatThisDaemonWrites) {
    const RecordRules rules{"ptyvisor", kRoot};
    EXPECT_FALSE(invalid_record_reason({kUnitA, kRoot + "/" + kUnitA, 0, 0}, rules));
    EXPECT_FALSE(invalid_record_reason({kUnitA, "", 1234, 5}, rules));
    EXPECT_TRUE(invalid_record_reason({"other-0123456789abcdef0123456789abcdef.service", "", 1234, 5}, rules));
    EXPECT_TRUE(invalid_record_reason({"ptyvisor-0123456789ABCDEF0123456789abcdef.service", "", 1234, 5}, rules));
    EXPECT_TRUE(invalid_record_reason({"ptyvisor-x.service", "", 1234, 5}, rules));
    EXPECT_TRUE(invalid_record_reason({kUnitA, kRoot + "/" + kUnitB, 0, 0}, rules));
    EXPECT_TRUE(invalid_record_reason({kUnitA, kRoot + "/" + kUnitA, 0, 0}, {"ptyvisor", ""}));
    EXPECT_TRUE(invalid_record_reason({kUnitA, "", 1234, 0}, rules));
}

TEST(ProcessStartTime, KnowsOurselvesAndNotTheDead) {
    EXPECT_TRUE(process_start_time(::getpid()).has_value());
    EXPECT_FALSE(process_start_time(0x7ffffff0).has_value());
}

}  // namespace
}  // namespace ptyvisor::backends::direct
