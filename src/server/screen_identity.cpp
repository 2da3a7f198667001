#include "server/screen_identity.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "common/process.h"

namespace ptyvisor::server {
namespace {

bool has_account(uid_t id) {
    std::vector<char> buffer(16384);
    passwd pw{};
    passwd* found_user = nullptr;
    if (::getpwuid_r(id, &pw, buffer.data(), buffer.size(), &found_user) == 0 && found_user) return true;
    group g{};
    group* found_group = nullptr;
    return ::getgrgid_r(static_cast<gid_t>(id), &g, buffer.data(), buffer.size(), &found_group) == 0 && found_group;
}

// The uids (all four of each "Uid:" line) of the processes that are not ptyvisor-screen.
std::set<uid_t> uids_of_others() {
    std::set<uid_t> out;
    DIR* d = ::opendir("/proc");
    if (!d) return out;
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string_view::npos) continue;
        const std::string dir = "/proc/" + std::string(name);
        const auto comm = read_small_file(dir + "/comm");
        if (comm && *comm == "ptyvisor-screen\n") continue;
        const auto status = read_small_file(dir + "/status");
        if (!status) continue;
        const auto at = status->find("\nUid:");
        if (at == std::string::npos) continue;
        const char* p = status->c_str() + at + 5;
        for (int i = 0; i < 4; ++i) {
            char* end = nullptr;
            const unsigned long id = std::strtoul(p, &end, 10);
            if (end == p) break;
            out.insert(static_cast<uid_t>(id));
            p = end;
        }
    }
    ::closedir(d);
    return out;
}

}  // namespace

UidProbe system_uid_probe() {
    // /proc is read once per probe, at the first question.
    auto others = std::make_shared<std::optional<std::set<uid_t>>>();
    return UidProbe{has_account, [others](uid_t id) {
                        if (!*others) *others = uids_of_others();
                        return (*others)->contains(id);
                    }};
}

bool pick_screen_uid(const UidProbe& probe, uid_t& out, std::string& why) {
    for (uid_t id = kScreenUidFirst; id <= kScreenUidLast; ++id) {
        if (probe.has_account(id) || probe.used_by_others(id)) continue;
        out = id;
        return true;
    }
    why = "every uid from " + std::to_string(kScreenUidFirst) + " to " + std::to_string(kScreenUidLast) +
          " has an account or a process; set [screen] user to an account of the worker's own";
    return false;
}

}  // namespace ptyvisor::server
