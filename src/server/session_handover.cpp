#include "server/session_handover.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::server {

namespace {

using nlohmann::json;

constexpr int kAllSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

template <class T>
bool get_number(const json& j, const char* key, T low, T high, T& out, std::string& why) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
        why = std::string("missing or non-integer field ") + key;
        return false;
    }
    const auto v = it->get<long long>();
    if (v < static_cast<long long>(low) || v > static_cast<long long>(high)) {
        why = std::string("field ") + key + " out of range";
        return false;
    }
    out = static_cast<T>(v);
    return true;
}

bool get_string(const json& j, const char* key, std::size_t max, std::string& out, std::string& why) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > max) {
        why = std::string("missing, non-string or too long field ") + key;
        return false;
    }
    out = it->get<std::string>();
    return true;
}

}  // namespace

std::string encode_handover(const HandoverRecord& r) {
    json j = {{"version", 1},
              {"id", r.id},
              {"unit", r.unit},
              {"argv", r.argv},
              {"cwd", r.cwd},
              {"created", r.created},
              {"starter_pid", r.starter_pid},
              {"main_pid", r.main_pid},
              {"detached", r.detached},
              {"rows", r.size.rows},
              {"cols", r.size.cols},
              {"bytes_in", r.bytes_in}};
    // Invalid UTF-8 in argv (a client may send any bytes) is kept byte for byte.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool decode_handover(std::string_view text, const std::string& unit_prefix, HandoverRecord& out, std::string& why) {
    if (text.size() > HandoverRecord::kMaxBytes) {
        why = "metadata too large";
        return false;
    }
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        why = "metadata is not a JSON object";
        return false;
    }
    int version = 0;
    if (!get_number(j, "version", 1, 1, version, why)) return false;
    HandoverRecord r;
    if (!get_string(j, "id", 64, r.id, why) || !get_string(j, "unit", 512, r.unit, why) ||
        !get_string(j, "cwd", 4096, r.cwd, why))
        return false;
    if (!protocol::is_session_id(r.id)) {
        why = "bad session id";
        return false;
    }
    if (r.unit != unit_prefix + "-" + r.id + ".service") {
        why = "unit " + r.unit + " is not the session's";
        return false;
    }
    const auto argv = j.find("argv");
    if (argv == j.end() || !argv->is_array() || argv->empty() || argv->size() > HandoverRecord::kMaxArgs) {
        why = "bad argv";
        return false;
    }
    for (const auto& a : *argv) {
        if (!a.is_string()) {
            why = "bad argv";
            return false;
        }
        r.argv.push_back(a.get<std::string>());
    }
    std::uint16_t rows = 0, cols = 0;
    const auto detached = j.find("detached");
    if (detached == j.end() || !detached->is_boolean()) {
        why = "missing field detached";
        return false;
    }
    r.detached = detached->get<bool>();
    if (!get_number<std::int64_t>(j, "created", 0, INT64_MAX, r.created, why) ||
        !get_number<pid_t>(j, "starter_pid", 0, 4194304, r.starter_pid, why) ||
        !get_number<pid_t>(j, "main_pid", 2, 4194304, r.main_pid, why) ||
        !get_number<std::uint16_t>(j, "rows", 1, UINT16_MAX, rows, why) ||
        !get_number<std::uint16_t>(j, "cols", 1, UINT16_MAX, cols, why))
        return false;
    const auto bytes_in = j.find("bytes_in");
    if (bytes_in == j.end() || !bytes_in->is_number_unsigned()) {
        why = "missing field bytes_in";
        return false;
    }
    r.bytes_in = bytes_in->get<std::uint64_t>();
    r.size = {rows, cols};
    out = std::move(r);
    return true;
}

int make_sealed_memfd(std::string_view name, std::string_view bytes, UniqueFd& out) {
    UniqueFd fd(::memfd_create(std::string(name.substr(0, 200)).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) return -errno;
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, kAllSeals) < 0) return -errno;
    out = std::move(fd);
    return 0;
}

int read_sealed_memfd(int fd, std::size_t max, std::string& out) {
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0) return errno == EINVAL ? -EBADMSG : -errno;
    // Sealed so, nobody (the fd store, a debugger) can change it while, or after, we read.
    if ((seals & kAllSeals) != kAllSeals) return -EBADMSG;
    struct stat st {};
    if (::fstat(fd, &st) < 0) return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || static_cast<std::size_t>(st.st_size) > max) return -EBADMSG;
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EBADMSG;
        done += static_cast<std::size_t>(n);
    }
    out = std::move(text);
    return 0;
}

std::string handover_name(std::string_view kind, std::string_view id) {
    return std::string(kind) + "-" + std::string(id);
}

std::pair<std::string, std::string> parse_handover_name(std::string_view name) {
    if (name == "listener") return {"listener", {}};
    const auto dash = name.find('-');
    if (dash == std::string_view::npos) return {};
    const auto kind = name.substr(0, dash);
    const auto id = name.substr(dash + 1);
    if ((kind != "pty" && kind != "log" && kind != "meta") || !protocol::is_session_id(id)) return {};
    return {std::string(kind), std::string(id)};
}

void collect_handed_over(HandedOver& out) {
    char** names = nullptr;
    const int n = sd_listen_fds_with_names(1, &names);
    if (n < 0) {
        log_error_errno(n, "cannot read the descriptors passed in LISTEN_FDS");
        return;
    }
    for (int i = 0; i < n; ++i) {
        UniqueFd fd(SD_LISTEN_FDS_START + i);
        const std::string name = names && names[i] ? names[i] : "unknown";
        ::fcntl(fd.get(), F_SETFD, FD_CLOEXEC);
        auto [kind, id] = parse_handover_name(name);
        // Socket activation names its socket after the .socket unit (FileDescriptorName=).
        if (kind.empty() && !out.listener && sd_is_socket_unix(fd.get(), SOCK_STREAM, 1, nullptr, 0) > 0)
            kind = "listener";
        if (kind.empty()) {
            log_warning("closing a passed descriptor that is not ours", {{"NAME", name}});
            continue;
        }
        if (kind == "listener") {
            const int flags = ::fcntl(fd.get(), F_GETFL);
            if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
            out.listener = std::move(fd);
            continue;
        }
        auto& s = out.sessions[id];
        UniqueFd& slot = kind == "pty" ? s.pty : kind == "log" ? s.log : s.meta;
        if (slot) log_warning("closing a duplicate passed descriptor", {{"NAME", name}});
        else slot = std::move(fd);
    }
    if (names) {
        for (int i = 0; i < n; ++i) std::free(names[i]);
        std::free(names);
    }
}

void fd_store_add(const std::string& name, int fd) {
    const std::string message = "FDSTORE=1\nFDNAME=" + name;
    if (const int r = sd_pid_notify_with_fds(0, 0, message.c_str(), &fd, 1); r < 0)
        log_error_errno(r, "cannot keep a descriptor in the fd store", {{"NAME", name}});
}

void fd_store_remove(const std::string& name) {
    const std::string message = "FDSTOREREMOVE=1\nFDNAME=" + name;
    sd_notify(0, message.c_str());
}

namespace {

using BusPtr = std::unique_ptr<sd_bus, decltype(&sd_bus_flush_close_unref)>;

BusPtr open_system_bus() {
    sd_bus* raw = nullptr;
    if (!std::getenv("NOTIFY_SOCKET") || sd_bus_open_system(&raw) < 0) return BusPtr(nullptr, &sd_bus_flush_close_unref);
    sd_bus_set_method_call_timeout(raw, 1'000'000);
    return BusPtr(raw, &sd_bus_flush_close_unref);
}

// The object path of the unit we run in; empty when unknown.
std::string own_unit_path(sd_bus* bus) {
    sd_bus_message* reply_raw = nullptr;
    sd_bus_error error{};  // SD_BUS_ERROR_NULL, without its C99 compound literal
    const int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "GetUnitByPID", &error, &reply_raw, "u",
                                     static_cast<std::uint32_t>(::getpid()));
    sd_bus_error_free(&error);
    std::unique_ptr<sd_bus_message, decltype(&sd_bus_message_unref)> reply(reply_raw, &sd_bus_message_unref);
    const char* path = nullptr;
    if (r < 0 || sd_bus_message_read(reply.get(), "o", &path) < 0 || !path) return {};
    return path;
}

}  // namespace

unsigned own_fd_store_max() {
    const auto bus = open_system_bus();
    if (!bus) return 0;
    const std::string unit_path = own_unit_path(bus.get());
    if (unit_path.empty()) return 0;
    sd_bus_error error{};  // SD_BUS_ERROR_NULL, without its C99 compound literal
    std::uint32_t max = 0;
    const int r = sd_bus_get_property_trivial(bus.get(), "org.freedesktop.systemd1", unit_path.c_str(),
                                              "org.freedesktop.systemd1.Service", "FileDescriptorStoreMax", &error,
                                              'u', &max);
    sd_bus_error_free(&error);
    return r < 0 ? 0 : max;
}

bool own_unit_restarting() {
    const auto bus = open_system_bus();
    if (!bus) return false;
    const std::string unit_path = own_unit_path(bus.get());
    if (unit_path.empty()) return false;
    sd_bus_error error{};  // SD_BUS_ERROR_NULL, without its C99 compound literal
    sd_bus_message* reply_raw = nullptr;
    int r = sd_bus_get_property(bus.get(), "org.freedesktop.systemd1", unit_path.c_str(),
                                "org.freedesktop.systemd1.Unit", "Job", &error, &reply_raw, "(uo)");
    sd_bus_error_free(&error);
    std::unique_ptr<sd_bus_message, decltype(&sd_bus_message_unref)> reply(reply_raw, &sd_bus_message_unref);
    std::uint32_t job_id = 0;
    const char* job_path = nullptr;
    if (r < 0 || sd_bus_message_read(reply.get(), "(uo)", &job_id, &job_path) < 0 || job_id == 0 || !job_path)
        return false;
    const std::string job = job_path;
    char* type = nullptr;
    r = sd_bus_get_property_string(bus.get(), "org.freedesktop.systemd1", job.c_str(), "org.freedesktop.systemd1.Job",
                                   "JobType", &error, &type);
    sd_bus_error_free(&error);
    if (r < 0 || !type) return false;
    const std::string job_type = type;
    std::free(type);
    // try-restart and reload-or-restart run as "restart" once queued.
    return job_type == "restart" || job_type == "try-restart";
}

bool is_pty_master(int fd) {
    unsigned int number = 0;
    return ::ioctl(fd, TIOCGPTN, &number) == 0;
}

void reexec_with(const std::string& binary, const std::vector<std::string>& argv,
                 const std::vector<std::pair<std::string, int>>& fds, bool& fatal, std::string& why) {
    fatal = false;
    if (::access(binary.c_str(), X_OK) < 0) {
        why = "cannot execute " + binary + ": " + std::strerror(errno);
        return;
    }
    const int count = static_cast<int>(fds.size());
    // First above the target range, so that placing one never closes another still to move.
    std::vector<int> high;
    for (const auto& [name, fd] : fds) {
        const int h = ::fcntl(fd, F_DUPFD_CLOEXEC, SD_LISTEN_FDS_START + count);
        if (h < 0) {
            why = std::string("cannot duplicate a descriptor to pass: ") + std::strerror(errno);
            for (const int x : high) ::close(x);
            return;
        }
        high.push_back(h);
    }
    std::string names;
    for (const auto& [name, fd] : fds) names += (names.empty() ? "" : ":") + name;
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // From here the descriptors at 3.. are overwritten: no way back.
    fatal = true;
    for (int i = 0; i < count; ++i) {
        // dup2 leaves the copy without FD_CLOEXEC: it survives the exec.
        if (::dup2(high[static_cast<std::size_t>(i)], SD_LISTEN_FDS_START + i) < 0) {
            why = std::string("cannot place a passed descriptor: ") + std::strerror(errno);
            return;
        }
    }
    ::setenv("LISTEN_FDS", std::to_string(count).c_str(), 1);
    ::setenv("LISTEN_FDNAMES", names.c_str(), 1);
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    ::execv(binary.c_str(), args.data());
    why = "cannot exec " + binary + ": " + std::strerror(errno);
}

}  // namespace ptyvisor::server
