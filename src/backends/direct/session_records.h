// SessionRecords: one small file per live direct session under <state_directory>/sessions,
// so that the next start of the daemon can end what a crashed one left running.
//
// A record names the session's cgroup, or, where there is no cgroup, its process group
// leader's PID together with that process's start time: the pair identifies the process,
// so cleanup never signals a PID that has been recycled. The pair means nothing after a
// reboot, so records belong under /run (the default state_directory, /run/ptyvisor).
//
// A record is data read back from disk, not trusted: list() returns only records this
// daemon could have written (see invalid_record_reason), and logs and deletes the rest
// without acting on them. Every file is reached through a handle on the directory and
// opened with O_NOFOLLOW; the directories must be ours and writable by us alone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {

struct SessionRecord {
    std::string unit;
    std::string cgroup;           // absolute cgroup path, or empty
    pid_t leader = 0;             // process group leader when there is no cgroup
    std::uint64_t start_time = 0; // /proc/PID/stat field 22 of the leader
};

// What this daemon could have written.
struct RecordRules {
    std::string unit_prefix = "ptyvisor";  // units are "<prefix>-<32 lowercase hex>.service"
    std::string cgroup_root;               // our instance cgroup (absolute), or empty for none
};

// Why `record` cannot be one of ours, or nullopt when it can: the unit name as the server
// makes them, the cgroup exactly <cgroup_root>/<unit>, or else a leader PID above 1 with
// its start time.
std::optional<std::string> invalid_record_reason(const SessionRecord& record, const RecordRules& rules);

class SessionRecords {
public:
    SessionRecords(std::string state_directory, RecordRules rules);

    // Creates the directories (0700) and opens the handle every other call works through.
    // Returns 0 or -errno (-EPERM: a directory that is not ours alone).
    int prepare();
    // Atomically (temp file + rename). Returns 0 or -errno.
    int write(const SessionRecord& record) const;
    void remove(const std::string& unit) const;
    // Valid records only; every other entry is logged and deleted.
    [[nodiscard]] std::vector<SessionRecord> list() const;

private:
    std::optional<SessionRecord> read(const std::string& name, std::string& why) const;

    std::string state_directory_;
    RecordRules rules_;
    UniqueFd directory_;  // <state_directory>/sessions
};

// Field 22 of /proc/PID/stat; nullopt when the process is gone.
std::optional<std::uint64_t> process_start_time(pid_t pid);

}  // namespace ptyvisor::backends::direct
