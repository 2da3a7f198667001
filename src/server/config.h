// Daemon configuration: defaults, then the TOML file, then flags.
// docs/configuration.md documents every key; keep the two in step.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "backends/sandbox_profile.h"
#include "client/default_socket.h"
#include "server/policy.h"

namespace ptyvisor::server {

inline constexpr const char* kDefaultConfigPath = "/etc/ptyvisor/ptyvisord.toml";

struct Limits {
    std::uint32_t max_sessions = 16;
    std::uint32_t max_unauthenticated = 32;
    std::uint32_t max_unauthenticated_per_peer = 4;
    std::uint32_t admissions_per_minute = 120;
    std::uint32_t socket_buffer_bytes = 128 * 1024;
    std::uint32_t held_input_bytes = 256 * 1024;    // INPUT held before exec, and when the PTY is full
    std::uint32_t output_buffer_bytes = 256 * 1024; // OUTPUT a bound session's client may lag behind
    std::uint32_t output_log_bytes = 2 * 1024 * 1024;   // each session's output log (OutputLog)
};

struct Timeouts {
    std::chrono::duration<double> handshake{5.0};
    std::chrono::duration<double> operation{10.0};  // a client write may stall this long
    std::chrono::duration<double> drain{2.0};       // output drain after the command exits
    std::chrono::duration<double> cleanup{15.0};    // stopping one session, of its own
    std::chrono::duration<double> retention{300.0}; // an exited detached session's status and log
    std::chrono::duration<double> reattach{30.0};   // a bound session waits for its client after a handover
};

// Sessions recorded as asciicast v2 files (server/recording.h).
struct Recording {
    std::string directory;                        // empty: sessions are not recorded
    std::uint64_t max_bytes = 64 * 1024 * 1024;   // each file; then a marker, and no more
    // All the directory's recordings together; past it, recordings stop as at max_bytes.
    std::uint64_t max_total_bytes = std::uint64_t{1} << 30;
    // Recordings stop while less than this share of the file system is free for others
    // (root would otherwise write into the blocks reserved for it).
    std::uint64_t keep_free_percent = 5;
    std::chrono::seconds retention{7 * 24 * 3600};  // files older than this are deleted; 0: kept
};

// The screen (server/screen_broker.h): a sandboxed emulator process follows every session.
struct ScreenSettings {
    bool enabled = true;          // false: no worker; SNAPSHOT fails, queries go unanswered
    // The worker's account; empty: a uid of its own (server/screen_identity.h). Never root.
    std::string user;
#if defined(__SANITIZE_ADDRESS__)
    // ASan+UBSan slow libvterm about tenfold, and a restarted worker replays whole logs.
    std::chrono::duration<double> reply_timeout{60.0};
#else
    std::chrono::duration<double> reply_timeout{5.0};  // a reply the worker owes, each
#endif
};

struct Config {
    std::string user;  // the agent's account; required
    std::string socket = client::kDefaultSocketPath;  // shared with the client
    std::string backend = "auto";  // auto | systemd | direct
    std::vector<std::string> allow_units;
    std::string unit_prefix = "ptyvisor";
    std::string state_directory = "/run/ptyvisor";
    std::string observer_group;  // its members may observe sessions (and root); empty: root only
    std::string supervisor_group;  // its members may observe and take the terminal (and root)
    Limits limits;
    Timeouts timeouts;
    Recording recording;
    ScreenSettings screen;
    std::map<std::string, std::string> session_properties;
    // Sandbox profiles (backends/sandbox_profile.h), by name. The agent may name one of
    // allowed_profiles in START; without a name its sessions get default_profile (none when
    // empty). The default is always allowed.
    std::map<std::string, backends::SandboxProfile> profiles;
    std::vector<std::string> allowed_profiles;
    std::string default_profile;
    // [policy] (server/policy.h, docs/policy.md): what the agent may start.
    Policy policy;
    // [audit] sink: "auto" (the journal where journald listens, else the file), "journal"
    // or "file" (audit.jsonl in the state directory).
    std::string audit_sink = "auto";
};

// "512M", "2G", "65536" (bytes; K, M, G, T are powers of 1024). nullopt when malformed.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);
// "50%" (of one CPU), 1 to 100000 percent. nullopt when malformed.
std::optional<std::uint32_t> parse_cpu_quota(std::string_view text);

// Errors follow docs/architecture.md, "Error conventions": false with a message for the
// person who wrote the file in `why`.

// Reads `path` over `config`. False with `why` naming the file, line and reason; `config`
// may then hold some of the file's values.
bool load_config_file(const std::string& path, Config& config, std::string& why);

// Checks what no single key can check alone, and the forms of names. False with `why`.
bool validate(const Config& config, std::string& why);

}  // namespace ptyvisor::server
