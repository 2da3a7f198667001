#include "backends/session_signals.h"

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "common/process.h"

namespace ptyvisor::backends {
namespace {

// The first line of `text` that starts with `key`, without the key.
std::optional<std::string_view> field(std::string_view text, std::string_view key) {
    std::size_t at = 0;
    while (at < text.size()) {
        const auto end = std::min(text.find('\n', at), text.size());
        const auto line = text.substr(at, end - at);
        if (line.substr(0, key.size()) == key) return line.substr(key.size());
        at = end + 1;
    }
    return std::nullopt;
}

bool next_number(std::string_view& s, std::uint64_t& out) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc{} || end == s.data()) return false;
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    return true;
}

std::vector<pid_t> parse_pids(const std::string& text) {
    std::vector<pid_t> pids;
    std::string_view s = text;
    std::uint64_t v = 0;
    for (;;) {
        while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
        if (s.empty() || !next_number(s, v)) break;
        pids.push_back(static_cast<pid_t>(v));
    }
    return pids;
}

std::vector<pid_t> all_pids() {
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (const dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long v = std::strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && v > 0) pids.push_back(static_cast<pid_t>(v));
    }
    ::closedir(d);
    return pids;
}

struct Tally {
    int members = 0;   // in the session (and the group, when one is asked for)
    int signalled = 0;
};

// Checks one candidate and signals it if it is a member (in `pgid` when > 0) the rule allows.
void consider(const SessionMembers& m, pid_t pid, pid_t pgid, int sig, Tally& tally) {
    const auto process = PidRef::pin(pid);
    if (!process) return;  // gone already
    const auto status = process->read("status");
    const auto stat = process->read("stat");
    const auto cgroup = m.cgroup.empty() ? std::nullopt : process->cgroup();
    // Read, then confirm: what we read is the pinned process's only if it is still there.
    if (!status || !stat || !process->confirm()) return;
    if (!m.cgroup.empty() ? cgroup != m.cgroup : parse_stat_session(*stat) != m.session_id) return;
    if (pgid > 0 && parse_stat_pgrp(*stat) != pgid) return;
    ++tally.members;
    const auto ids = parse_status_uids(*status);
    if (!ids || !agent_may_signal(*ids, m.agent)) return;
    if (process->signal(sig) == 0) ++tally.signalled;
}

int deliver(const SessionMembers& m, pid_t pgid, int sig) {
    std::vector<pid_t> candidates;
    if (!m.cgroup.empty()) {
        const auto procs = read_small_file(m.cgroup_dir + "/cgroup.procs");
        if (procs) candidates = parse_pids(*procs);
    } else if (m.session_id > 0) {
        candidates = all_pids();
    }
    Tally tally;
    for (const pid_t pid : candidates) consider(m, pid, pgid, sig, tally);
    if (tally.signalled > 0) return 0;
    return tally.members > 0 ? -EPERM : -ESRCH;
}

}  // namespace

std::optional<ProcessIds> parse_status_uids(std::string_view status) {
    const auto line = field(status, "Uid:");
    if (!line) return std::nullopt;
    std::string_view s = *line;
    std::uint64_t v[4];
    for (auto& x : v)
        if (!next_number(s, x) || x > 0xffffffffu) return std::nullopt;
    return ProcessIds{static_cast<uid_t>(v[0]), static_cast<uid_t>(v[1]), static_cast<uid_t>(v[2]),
                      static_cast<uid_t>(v[3])};
}

bool agent_may_signal(const ProcessIds& ids, uid_t agent) {
    return ids.real == agent && ids.saved == agent;
}

std::optional<pid_t> parse_stat_pgrp(std::string_view stat) {
    const auto v = stat_field(stat, 5);
    return v ? std::optional<pid_t>(static_cast<pid_t>(*v)) : std::nullopt;
}

std::optional<pid_t> parse_stat_session(std::string_view stat) {
    const auto v = stat_field(stat, 6);
    return v ? std::optional<pid_t>(static_cast<pid_t>(*v)) : std::nullopt;
}

int signal_members(const SessionMembers& members, int sig) { return deliver(members, 0, sig); }

int signal_member_group(const SessionMembers& members, pid_t pgid, int sig) {
    if (pgid <= 0) return -ESRCH;
    return deliver(members, pgid, sig);
}

}  // namespace ptyvisor::backends
