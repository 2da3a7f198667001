// The screen worker's identity: a uid and gid of its own, that no account and no other
// process has.
//
// The worker runs as an unprivileged identity, and whoever shares it may signal and ptrace
// it: as `nobody`, any `nobody` process on the machine could stop it (kill -STOP), and with
// it every session's screen and query answers (docs/security.md, "The screen worker's
// identity"). So by default ([screen] user = "") the daemon picks a number in
// kFirst..kLast, a range systemd documents as unused (between its dynamic service users
// and the container ranges), that has no passwd or group entry and that no process other
// than a ptyvisor-screen worker runs as. Workers of several daemons on one machine may share
// it: their seccomp filter allows no kill, ptrace or open.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace ptyvisor::server {

inline constexpr uid_t kScreenUidFirst = 0x70000;  // 458752
inline constexpr uid_t kScreenUidLast = kScreenUidFirst + 1023;

// What decides whether a number is free: an account or group has it, or a process other
// than a worker runs as it. Replaceable for tests.
struct UidProbe {
    std::function<bool(uid_t)> has_account;    // a passwd entry with the uid, or a group with the gid
    std::function<bool(uid_t)> used_by_others;  // a process, other than a ptyvisor-screen worker
};
UidProbe system_uid_probe();

// The first free number in the range: true with `out`, or false with `why`.
bool pick_screen_uid(const UidProbe& probe, uid_t& out, std::string& why);

}  // namespace ptyvisor::server
