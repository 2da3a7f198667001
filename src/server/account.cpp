#include "server/account.h"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace ptyvisor::server {

bool resolve_account(const std::string& name, backends::Account& out, std::string& why) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    const int e = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
    // getpwnam_r(3): some sources say "not found" with ENOENT or ESRCH rather than 0.
    if (e != 0 && e != ENOENT && e != ESRCH) {
        why = "cannot look up the account " + name + ": " + std::strerror(e);
        return false;
    }
    if (!found) {
        why = "no such account: " + name;
        return false;
    }
    if (pw.pw_uid == 0) {
        why = "the agent's account must not be root";
        return false;
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
    out = std::move(a);
    return true;
}

}  // namespace ptyvisor::server
