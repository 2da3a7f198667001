#include "server/account.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace ptyvisor::server {

std::optional<backends::Account> resolve_account(const std::string& name, std::string& why) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
        why = "no such account: " + name;
        return std::nullopt;
    }
    if (pw.pw_uid == 0) {
        why = "the agent's account must not be root";
        return std::nullopt;
    }
    backends::Account a;
    a.name = name;
    a.uid = pw.pw_uid;
    a.gid = pw.pw_gid;
    a.home = pw.pw_dir ? pw.pw_dir : "/";
    a.shell = pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh";
    int n = 64;
    a.groups.resize(static_cast<std::size_t>(n));
    while (::getgrouplist(name.c_str(), a.gid, a.groups.data(), &n) < 0) a.groups.resize(static_cast<std::size_t>(n));
    a.groups.resize(static_cast<std::size_t>(n));
    return a;
}

}  // namespace ptyvisor::server
