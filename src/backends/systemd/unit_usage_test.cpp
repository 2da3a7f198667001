#include "backends/systemd/unit_usage.h"

#include <gtest/gtest.h>

namespace ptyvisor::backends::systemd {
namespace {

TEST(UnitUsage, KeyedValues) {
    const char* cpu = "usage_usec 3324\nuser_usec 0\nsystem_usec 3324\nnice_usec 0\n";
    EXPECT_EQ(keyed_value(cpu, "usage_usec"), 3324u);
    EXPECT_EQ(keyed_value(cpu, "user_usec"), 0u);
    EXPECT_EQ(keyed_value(cpu, "usage"), std::nullopt);
    const char* oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
    EXPECT_EQ(keyed_value(oom, "oom_kill"), 2u);
    EXPECT_EQ(keyed_value("max 0\n", "max"), 0u);
    EXPECT_EQ(keyed_value("max x\n", "max"), std::nullopt);
}

TEST(UnitUsage, IoStat) {
    std::optional<std::uint64_t> r, w;
    io_stat_bytes("8:0 rbytes=4096 wbytes=10 rios=1 wios=1 dbytes=0 dios=0\n"
                  "253:0 rbytes=1 wbytes=2 rios=1 wios=1 dbytes=0 dios=0\n",
                  r, w);
    EXPECT_EQ(r, 4097u);
    EXPECT_EQ(w, 12u);
}

TEST(UnitUsage, Blkio) {
    std::optional<std::uint64_t> r, w;
    blkio_bytes("8:0 Read 4096\n8:0 Write 512\n8:0 Sync 0\n8:0 Async 0\n8:0 Total 4608\n"
                "8:16 Read 4\nTotal 4612\n",
                r, w);
    EXPECT_EQ(r, 4100u);
    EXPECT_EQ(w, 512u);
    std::optional<std::uint64_t> r0, w0;
    blkio_bytes("Total 0\n", r0, w0);
    EXPECT_EQ(r0, 0u);
    EXPECT_EQ(w0, 0u);
}

// Attack: a cgroup path that climbs out of the hierarchy is not read.
TEST(UnitUsage, AGoneOrBadCgroupHasNoUsage) {
    HostEnforcement h;
    h.layout = CgroupLayout::Unified;
    h.unified_mount = "/sys/fs/cgroup";
    EXPECT_EQ(read_unit_usage(h, "/no-such.slice/no-such.service"), std::nullopt);
    EXPECT_EQ(read_unit_usage(h, "/../../etc"), std::nullopt);
    EXPECT_EQ(read_unit_usage(h, ""), std::nullopt);
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
