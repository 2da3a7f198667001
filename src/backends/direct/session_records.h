// SessionRecords: one small file per live direct session under <state_directory>/sessions,
// so that the next start of the daemon can end what a crashed one left running.
//
// A record names the session's cgroup, or, where there is no cgroup, its process group
// leader's PID together with that process's start time: the pair identifies the process,
// so cleanup never signals a PID that has been recycled.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptyvisor::backends::direct {

struct SessionRecord {
    std::string unit;
    std::string cgroup;           // absolute cgroup path, or empty
    pid_t leader = 0;             // process group leader when there is no cgroup
    std::uint64_t start_time = 0; // /proc/PID/stat field 22 of the leader
};

class SessionRecords {
public:
    explicit SessionRecords(std::string state_directory);

    // Creates the directory (0700). Returns 0 or an errno.
    int prepare() const;
    int write(const SessionRecord& record) const;  // atomically (temp file + rename)
    void remove(const std::string& unit) const;
    [[nodiscard]] std::vector<SessionRecord> list() const;

private:
    std::string directory_;
};

// Field 22 of /proc/PID/stat; nullopt when the process is gone.
std::optional<std::uint64_t> process_start_time(pid_t pid);

}  // namespace ptyvisor::backends::direct
