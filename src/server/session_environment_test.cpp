#include "server/session_environment.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ptyvisor::server {
namespace {

backends::Account account() {
    backends::Account a;
    a.name = "agent";
    a.home = "/home/agent";
    a.shell = "/bin/bash";
    return a;
}

bool contains(const std::vector<std::string>& env, const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(SessionEnvironment, FillsLoginVariablesWhereMissing) {
    const auto env = session_environment({"LANG=C.UTF-8"}, "xterm-256color", account());
    EXPECT_TRUE(contains(env, "LANG=C.UTF-8"));
    EXPECT_TRUE(contains(env, "TERM=xterm-256color"));
    EXPECT_TRUE(contains(env, "USER=agent"));
    EXPECT_TRUE(contains(env, "LOGNAME=agent"));
    EXPECT_TRUE(contains(env, "HOME=/home/agent"));
    EXPECT_TRUE(contains(env, "SHELL=/bin/bash"));
}

TEST(SessionEnvironment, KeepsTheClientsValues) {
    const auto env = session_environment({"HOME=/work", "USER=someone"}, "", account());
    EXPECT_TRUE(contains(env, "HOME=/work"));
    EXPECT_TRUE(contains(env, "USER=someone"));
    EXPECT_FALSE(contains(env, "HOME=/home/agent"));
}

TEST(SessionEnvironment, TermComesFromStartOnly) {
    const auto env = session_environment({"TERM=vt100"}, "", account());
    EXPECT_TRUE(contains(env, "TERM=dumb"));
    EXPECT_FALSE(contains(env, "TERM=vt100"));
}

}  // namespace
}  // namespace ptyvisor::server
