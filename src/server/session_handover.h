// Session handover: what one run of the daemon leaves to the next so that live sessions
// survive a restart (docs/operations.md, "What survives what").
//
// Each running session is three descriptors, named "<kind>-<id>" (kind pty, log or meta; id
// the session's 32 hex digits):
//   pty-<id>   the PTY master
//   log-<id>   the OutputLog memfd (server/output_log.h), with its offsets in its header
//   meta-<id>  a sealed memfd holding one HandoverRecord as JSON (argv, cwd, unit, pid, ...)
// and the daemon's listening socket may come along as "listener". They reach the next run
// the way systemd passes stored descriptors (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID; see
// sd_listen_fds(3)): from systemd's fd store, or from our own re-exec (reexec_with()).
//
// Invariants:
//  - What comes back is read as untrusted input: names are parsed strictly, the metadata is
//    bounded in size, must be sealed against writes, and every field is range-checked;
//    unknown or incomplete sets are closed and logged, never half used.
//  - A session is taken back only as a whole (terminal, log, metadata and a backend that
//    recognises its unit and main process); anything less is left to cleanup_orphans().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/payloads.h"

namespace ptyvisor::server {

// What a session needs besides its descriptors.
struct HandoverRecord {
    // The whole JSON. A START's argv may take its whole payload (256 KiB), and JSON escapes a
    // control byte in six: 2 MiB holds any argv a START can carry, with its cwd. (At 256 KiB,
    // an argv near START's bound could not be handed over, and its session was lost at a
    // restart.)
    static constexpr std::size_t kMaxBytes = 2 * 1024 * 1024;
    static constexpr std::size_t kMaxArgs = 4096;

    std::string id;    // 32 lowercase hex digits
    std::string unit;  // "<prefix>-<id>.service"
    std::vector<std::string> argv;
    std::string cwd;
    std::int64_t created = 0;  // seconds since the epoch
    pid_t starter_pid = 0;
    pid_t main_pid = 0;        // > 1
    bool detached = false;
    protocol::WindowSize size;
    std::uint64_t bytes_in = 0;
};

std::string encode_handover(const HandoverRecord& record);
// False with `why` unless `json` is one well-formed record whose unit is `unit_prefix`-<id>.
bool decode_handover(std::string_view json, const std::string& unit_prefix, HandoverRecord& out, std::string& why);

// A memfd holding `bytes`, sealed against every change. 0 or -errno.
int make_sealed_memfd(std::string_view name, std::string_view bytes, UniqueFd& out);
// The contents of a memfd sealed against writes and resizing, at most `max` bytes.
// 0, -EBADMSG (not sealed so, or too big), or -errno.
int read_sealed_memfd(int fd, std::size_t max, std::string& out);

// One session's descriptors as they came back; any may be missing.
struct HandedOverSession {
    UniqueFd pty, log, meta;
};

struct HandedOver {
    UniqueFd listener;
    std::map<std::string, HandedOverSession> sessions;  // by id
    [[nodiscard]] bool empty() const { return !listener && sessions.empty(); }
};

// The descriptor names, and their parsing: {kind, id}, or an empty kind when `name` is not
// one of ours.
std::string handover_name(std::string_view kind, std::string_view id);
std::pair<std::string, std::string> parse_handover_name(std::string_view name);

// Takes every descriptor passed in LISTEN_FDS (and unsets the variables): ours are sorted
// into `out`, the rest closed and logged.
void collect_handed_over(HandedOver& out);

// The service manager's fd store (sd_notify(3) FDSTORE=1, FDSTOREREMOVE=1), where systemd keeps
// descriptors across a restart of the service (and drops a PTY master by itself once it hangs
// up). Without a service manager these do nothing.
void fd_store_add(const std::string& name, int fd);
void fd_store_remove(const std::string& name);
// FileDescriptorStoreMax= of the unit we run in, read from systemd at start-up (blocking,
// briefly); 0 when we run under no service manager or it cannot be read.
unsigned own_fd_store_max();
// Whether systemd is restarting the unit we run in right now (a restart job is running on it,
// as for `systemctl restart` or a package upgrade's try-restart), as opposed to stopping it.
// Blocks on the bus for at most a second; false when it cannot tell.
bool own_unit_restarting();

// Whether `fd` is a PTY master (TIOCGPTN answers only on a master).
bool is_pty_master(int fd);

// Replaces this process with `binary` run with `argv`, passing `fds` as sd_listen_fds(3)
// expects them: at 3, 4, ... with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID set. Only
// returns on failure, with `why`; `fatal` then says whether the process's descriptors were
// already moved (it can no longer serve and must exit: its sessions are left to the next
// start's cleanup, as after a crash).
void reexec_with(const std::string& binary, const std::vector<std::string>& argv,
                 const std::vector<std::pair<std::string, int>>& fds, bool& fatal, std::string& why);

}  // namespace ptyvisor::server
