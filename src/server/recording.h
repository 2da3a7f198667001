// Session recordings: every session's output as an asciicast v2 file (asciinema's format),
// when [recording] directory is configured (docs/configuration.md).
//
// Recordings (one, in Server) owns the directory: it opens it at start, creating it 0700,
// and refuses it when it is a symlink, not root's, or writable by group or others (as the
// state directory: common/private_directory.h). It deletes expired recordings at start and
// then every hour. A Recorder (one per session) owns one file, <directory>/<session id>.cast.
//
// The file:
//
//   {"version": 2, "width": 80, "height": 24, "timestamp": 1700000000, "command": "sh -c ls", "env": {"TERM": "xterm"}}
//   [0.012345, "o", "output text"]
//   [1.500000, "r", "132x40"]
//   [9.000000, "m", "recording stopped: ..."]
//
// Times are seconds since the start, from the event loop's monotonic clock. "o" text is the
// output decoded as asciinema's own recorder decodes it: UTF-8, each maximal ill-formed
// subpart replaced by U+FFFD. A character is never split between two events: an incomplete
// sequence at the end of one read is carried over to the next.
//
// Who can touch it: the daemon creates every file as root, O_CREAT | O_EXCL | O_NOFOLLOW,
// mode 0600, by a name that is its own (the session's random id), through its handle on a
// directory only root may write. The agent can neither read, alter, replace nor delete a
// recording.
//
// Writes are plain write(2) calls on the event loop. That is acceptable because the file is
// not a path a client chose (no FUSE mount, no FIFO, nothing the agent serves): it is a local,
// root-owned regular file in a directory the administrator chose, and a write lands in the
// page cache without waiting for the disk (there is no fsync). The volume is bounded by
// max_bytes per session, by max_total_bytes for the directory (the sizes of its recordings,
// counted at start and kept up to date), and by keep_free_percent of the file system, checked
// every kFreeCheckBytes written, since a few sessions printing at full speed can fill a file
// system within seconds, reserved blocks included. Past either, recordings stop as at max_bytes (a marker,
// then no more), and new sessions run unrecorded, logged; no recording is deleted to make
// room, since what the agent did earlier is what a recording is kept for. A write that fails (ENOSPC, EIO, ...) stops that recording, logged,
// with the file cut back to its last whole line; it never affects the session.
//
// Not thread-safe; the event loop's.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/event.h"
#include "common/unique_fd.h"
#include "common/utf8.h"
#include "protocol/payloads.h"
#include "server/config.h"
#include "server/log_follower.h"
#include "server/output_log.h"

namespace ptyvisor::server {

// `text`, valid UTF-8, as a JSON string (quotes included), escaped as Python's json.dumps
// with ensure_ascii=False escapes it: '"', '\\' and the control characters below 0x20.
std::string json_string(std::string_view text);

// One session's recording.
class Recorder final : public LogFollower {
public:
    struct Setup {
        std::string name;   // the file's name in the directory
        std::string path;   // its full path, for the logs
        protocol::WindowSize size;
        std::int64_t timestamp = 0;  // the start, Unix seconds
        std::string command;
        std::optional<std::string> term;
        std::uint64_t max_bytes = 64 * 1024 * 1024;
        std::function<std::uint64_t()> clock;  // monotonic microseconds
        std::function<void()> closed;          // once, when the file is closed; may be empty
        // Before each write: whether `bytes` more may be written (the directory's bounds); the
        // reason in `why` when not. Empty: no bound but max_bytes.
        std::function<bool(std::size_t bytes, std::string& why)> room;
    };

    // Creates the file in `directory` (O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) and
    // writes the header. Returns 0 with the recorder in `out`, or -errno; a file that was
    // created is then removed.
    static int create(int directory, Setup setup, std::unique_ptr<Recorder>& out);

    ~Recorder();  // finish()
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // Output: one "o" event of the text of `first` then `second` (an OutputLog::View's two
    // pieces), with what the last call carried.
    void output(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second = {});
    void output(const OutputLog::View& view) { output(view.first, view.second); }
    // An "r" event, when the size changed.
    void resize(protocol::WindowSize size);
    // LogFollower: every byte as it is read, and every resize.
    void log_read(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) override {
        output(first, second);
    }
    void log_resized(ScreenSubject& session) override { resize(session.size()); }
    // The end: a carried incomplete character is written as U+FFFD, and the file closed.
    void finish();

    // False once stopped: finished, at the size limit, or after a failed write.
    [[nodiscard]] bool recording() const { return file_.valid(); }
    [[nodiscard]] std::uint64_t bytes_written() const { return written_; }

    // Room kept below max_bytes for the marker line that ends a recording at the limit: a
    // recording's events and that marker stay within max_bytes (its header aside).
    static constexpr std::size_t kMarkerRoom = 256;

private:
    Recorder(UniqueFd file, Setup setup, std::uint64_t start_usec, std::uint64_t written);
    void event(const char* type, std::string_view text);
    int write_all(std::string_view data);
    void stop(int error);
    void close();

    UniqueFd file_;
    Setup setup_;
    std::uint64_t start_usec_;
    std::uint64_t written_;
    utf8::StreamDecoder decoder_;  // as Python's incremental "replace" decoder (asciinema's)
    std::string text_;  // reused for each event's text
};

// The recordings directory of the daemon.
class Recordings {
public:
    Recordings(Recording config, sd_event* event);
    ~Recordings();
    Recordings(const Recordings&) = delete;
    Recordings& operator=(const Recordings&) = delete;

    // With a directory configured: opens it (creating it 0700), checks that it is root's
    // alone, deletes the expired recordings and arms the hourly sweep. Returns 0 (also when
    // recording is off), or -errno: -ENOTDIR or -ELOOP for a symlink or a non-directory,
    // -EPERM for a directory that is not root's alone (private_directory_error() words them).
    int init();
    [[nodiscard]] bool enabled() const { return directory_.valid(); }

    // The recorder of a session whose terminal just opened, or nullptr when recording is off
    // or the file cannot be created (logged: the session runs unrecorded). "command" is
    // `argv` joined by spaces, TERM the first in `env`.
    std::unique_ptr<Recorder> start(const std::string& id, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, protocol::WindowSize size);

    // Whether `bytes` more may be written into the directory (Recorder::Setup::room); counted
    // when they may.
    bool room(std::size_t bytes, std::string& why);
    [[nodiscard]] std::uint64_t total_bytes() const { return total_; }
    // The recording of session `id` (32 hex digits), opened for reading; invalid when there is
    // none (or recording is off).
    [[nodiscard]] UniqueFd open_for_reading(const std::string& id) const;
    static constexpr std::uint64_t kFreeCheckBytes = 1 << 20;

private:
    void expire();
    bool enough_free_space(std::string& why);

    Recording config_;
    sd_event* event_;
    UniqueFd directory_;
    std::uint64_t total_ = 0;              // bytes of the directory's recordings
    std::uint64_t since_free_check_ = 0;   // written since the file system's free space was read
    bool full_ = false;                    // the last room() said no (logged once per episode)
    EventSource expiry_timer_;
    std::set<std::string> open_;  // files being recorded: never expired
};

// Deletes the regular files named "*.cast" in `directory` last modified before `cutoff`
// (Unix seconds), but those named in `keep`. Symlinks and other files are left alone; every
// entry is reached through `directory` (fstatat, unlinkat), no link followed. Returns how
// many were deleted, or -errno when the directory cannot be read. `freed` (when given) gets
// the bytes they held added.
int delete_expired_recordings(int directory, std::time_t cutoff, const std::set<std::string>& keep,
                              std::uint64_t* freed = nullptr);
// The bytes of the regular "*.cast" files in `directory`, or -errno.
std::int64_t recordings_size(int directory);

}  // namespace ptyvisor::server
