#include "backends/systemd/host_enforcement.h"

#include <gtest/gtest.h>

namespace ptyvisor::backends::systemd {
namespace {

// /proc/self/mountinfo of this build machine (a hybrid host), abridged.
constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:5 - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

SandboxProfile limits_profile() {
    SandboxProfile p;
    p.name = "small";
    p.memory_max = 64ull << 20;
    p.tasks_max = 32;
    p.cpu_quota_percent = 50;
    return p;
}

TEST(HostEnforcement, Version) {
    EXPECT_EQ(parse_systemd_version("252.39-1~deb12u2"), 252u);
    EXPECT_EQ(parse_systemd_version("v256~rc1"), 256u);
    EXPECT_EQ(parse_systemd_version(""), 0u);
}

TEST(HostEnforcement, V1MountsGiveTheirControllers) {
    HostEnforcement h;
    apply_v1_mounts(kHybridMountinfo, h);
    EXPECT_TRUE(h.memory);
    EXPECT_TRUE(h.pids);
    EXPECT_TRUE(h.cpu);
    EXPECT_TRUE(h.io);
    HostEnforcement joint;
    apply_v1_mounts("1 2 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
                    "3 2 0:2 / /mnt/memory rw - cgroup cgroup rw,memory\n",
                    joint);
    EXPECT_TRUE(joint.cpu);
    EXPECT_FALSE(joint.memory) << "a hierarchy outside /sys/fs/cgroup is not systemd's";
}

TEST(HostEnforcement, V2ControllersLine) {
    HostEnforcement h;
    apply_v2_controllers("cpuset cpu io memory hugetlb pids rdma misc\n", h);
    EXPECT_TRUE(h.memory && h.pids && h.cpu && h.io);
    HostEnforcement empty;
    apply_v2_controllers("hugetlb\n", empty);
    EXPECT_FALSE(empty.memory || empty.pids || empty.cpu || empty.io);
}

TEST(HostEnforcement, Swaps) {
    EXPECT_FALSE(swap_listed("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"));
    EXPECT_TRUE(swap_listed("Filename Type Size Used Priority\n/swapfile file 1024 0 -2\n"));
}

// Attack: a host where systemd accepts MemoryMax=/TasksMax=/CPUQuota= and enforces none of
// them (its cgroup v2 root has no controllers: they are all bound to v1, as in a container on
// this machine). The session must be refused, not run without its limits.
TEST(HostEnforcement, LimitsSystemdWouldIgnoreAreRefused) {
    HostEnforcement h;
    h.systemd_version = 252;
    h.layout = CgroupLayout::Unified;
    apply_v2_controllers("hugetlb", h);
    std::string why;
    SandboxProfile memory;
    memory.name = "m";
    memory.memory_max = 1 << 20;
    EXPECT_FALSE(check_profile_on(h, memory, why));
    EXPECT_NE(why.find("memory controller"), std::string::npos) << why;
    SandboxProfile tasks;
    tasks.name = "t";
    tasks.tasks_max = 10;
    EXPECT_FALSE(check_profile_on(h, tasks, why));
    EXPECT_NE(why.find("pids"), std::string::npos) << why;
    SandboxProfile cpu;
    cpu.name = "c";
    cpu.cpu_quota_percent = 10;
    EXPECT_FALSE(check_profile_on(h, cpu, why));
    EXPECT_NE(why.find("cpu"), std::string::npos) << why;
    // Namespaces need no controller.
    SandboxProfile ns;
    ns.name = "ns";
    ns.network = SandboxProfile::Network::None;
    ns.filesystem = SandboxProfile::Filesystem::ReadOnly;
    ns.hidden = {"/srv"};
    EXPECT_TRUE(check_profile_on(h, ns, why)) << why;
}

TEST(HostEnforcement, HybridWithV1ControllersEnforcesLimits) {
    HostEnforcement h;
    h.systemd_version = 252;
    h.layout = CgroupLayout::Hybrid;
    apply_v1_mounts(kHybridMountinfo, h);
    std::string why;
    EXPECT_TRUE(check_profile_on(h, limits_profile(), why)) << why;
}

// Attack: a memory hog on a v1 host with swap pages out past its MemoryMax= (systemd has no
// MemorySwapMax= on v1).
TEST(HostEnforcement, V1MemoryLimitWithSwapIsRefused) {
    HostEnforcement h;
    h.systemd_version = 252;
    h.layout = CgroupLayout::Hybrid;
    apply_v1_mounts(kHybridMountinfo, h);
    h.swap = true;
    std::string why;
    EXPECT_FALSE(check_profile_on(h, limits_profile(), why));
    EXPECT_NE(why.find("swap"), std::string::npos) << why;
    h.layout = CgroupLayout::Unified;  // v2: MemorySwapMax=0 covers it
    EXPECT_TRUE(check_profile_on(h, limits_profile(), why)) << why;
}

TEST(HostEnforcement, OldSystemdHasNoStrictProtectSystem) {
    HostEnforcement h;
    h.systemd_version = 231;
    h.layout = CgroupLayout::Unified;
    SandboxProfile ro;
    ro.name = "ro";
    ro.filesystem = SandboxProfile::Filesystem::ReadOnly;
    std::string why;
    EXPECT_FALSE(check_profile_on(h, ro, why));
    EXPECT_NE(why.find("ProtectSystem=strict"), std::string::npos) << why;
}

}  // namespace
}  // namespace ptyvisor::backends::systemd
