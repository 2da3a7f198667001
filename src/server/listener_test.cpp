// open_listener() on a path of its own (no socket activation): the attacks on the socket
// directory, and where the socket ends up when the directory is sound. Needs root: the
// daemon gives the socket away with chown, and the attacks need directories of other owners.
#include "server/listener.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ptyvisor::server {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kGroup = 65534;  // any group but root's will do

class Listener : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0)
            GTEST_SKIP() << "SKIPPED, NOT TESTED: open_listener chowns the socket and these "
                            "tests chown directories; run as root";
        ::unsetenv("LISTEN_FDS");
        char dir[] = "/tmp/ptyvisor-listener-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        root_ = dir;
    }
    void TearDown() override {
        if (!root_.empty()) std::filesystem::remove_all(root_);
    }
    std::string make_dir(const std::string& name, mode_t mode, uid_t owner) {
        const std::string path = root_ + "/" + name;
        EXPECT_EQ(::mkdir(path.c_str(), 0700), 0);
        EXPECT_EQ(::chmod(path.c_str(), mode), 0);
        EXPECT_EQ(::chown(path.c_str(), owner, 0), 0);
        return path;
    }
    static bool exists(const std::string& path) {
        struct stat st{};
        return ::lstat(path.c_str(), &st) == 0;
    }
    std::string root_;
};

TEST_F(Listener, SocketIsRootAndTheGroupWithMode0660) {
    const auto dir = make_dir("ok", 0755, 0);
    UniqueFd fd;
    std::string why;
    ASSERT_TRUE(open_listener(dir + "/s.sock", kGroup, fd, why)) << why;
    EXPECT_TRUE(fd);
    struct stat st{};
    ASSERT_EQ(::lstat((dir + "/s.sock").c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_gid, kGroup);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
}

TEST_F(Listener, MissingDirectoryIsCreatedRoot0755EvenUnderUmask0077) {
    const mode_t old = ::umask(0077);  // the unit's UMask=
    UniqueFd fd;
    std::string why;
    const bool ok = open_listener(root_ + "/new/s.sock", kGroup, fd, why);
    ::umask(old);
    ASSERT_TRUE(ok) << why;
    struct stat st{};
    ASSERT_EQ(::lstat((root_ + "/new").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(Listener, StaleSocketIsReplaced) {
    const auto dir = make_dir("ok", 0755, 0);
    UniqueFd first, again;
    std::string why;
    ASSERT_TRUE(open_listener(dir + "/s.sock", kGroup, first, why)) << why;
    EXPECT_TRUE(open_listener(dir + "/s.sock", kGroup, again, why)) << why;
    EXPECT_TRUE(again);
}

TEST_F(Listener, SocketDirectoryOwnedByAnotherUserIsRefused) {
    const auto dir = make_dir("theirs", 0755, kNobody);
    UniqueFd fd;
    std::string why;
    EXPECT_FALSE(open_listener(dir + "/s.sock", kGroup, fd, why));
    EXPECT_FALSE(fd);
    EXPECT_NE(why.find("not root"), std::string::npos) << why;
    EXPECT_FALSE(exists(dir + "/s.sock"));
}

TEST_F(Listener, WorldWritableSocketDirectoryIsRefused) {
    const auto dir = make_dir("open", 01777, 0);  // sticky, like /tmp: still refused
    UniqueFd fd;
    std::string why;
    EXPECT_FALSE(open_listener(dir + "/s.sock", kGroup, fd, why));
    EXPECT_FALSE(fd);
    EXPECT_NE(why.find("writable by group or others"), std::string::npos) << why;
    EXPECT_FALSE(exists(dir + "/s.sock"));
}

TEST_F(Listener, GroupWritableSocketDirectoryIsRefused) {
    const auto dir = make_dir("group", 0775, 0);
    UniqueFd fd;
    std::string why;
    EXPECT_FALSE(open_listener(dir + "/s.sock", kGroup, fd, why));
    EXPECT_FALSE(fd);
    EXPECT_FALSE(exists(dir + "/s.sock"));
}

TEST_F(Listener, SymlinkedSocketDirectoryIsRefused) {
    const auto real = make_dir("real", 0755, 0);
    ASSERT_EQ(::symlink(real.c_str(), (root_ + "/link").c_str()), 0);
    UniqueFd fd;
    std::string why;
    EXPECT_FALSE(open_listener(root_ + "/link/s.sock", kGroup, fd, why));
    EXPECT_FALSE(fd);
    EXPECT_NE(why.find("symlink"), std::string::npos) << why;
    EXPECT_FALSE(exists(real + "/s.sock"));
}

// A symlink planted at the socket's name is neither followed nor given away.
TEST_F(Listener, SymlinkAtTheSocketNameIsNotFollowed) {
    const auto dir = make_dir("ok", 0755, 0);
    const std::string target = root_ + "/secret";
    std::ofstream(target) << "x";
    ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
    ASSERT_EQ(::symlink(target.c_str(), (dir + "/s.sock").c_str()), 0);
    UniqueFd fd;
    std::string why;
    EXPECT_FALSE(open_listener(dir + "/s.sock", kGroup, fd, why));
    EXPECT_FALSE(fd);
    struct stat st{};
    ASSERT_EQ(::stat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace ptyvisor::server
