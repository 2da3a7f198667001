#include "server/recording.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/private_directory.h"

namespace ptyvisor::server {
namespace {

constexpr std::uint64_t kExpiryIntervalUsec = 3600ull * 1000 * 1000;

std::string seconds_text(std::uint64_t usec) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%llu.%06llu", static_cast<unsigned long long>(usec / 1000000),
                  static_cast<unsigned long long>(usec % 1000000));
    return buffer;
}

}  // namespace

std::string json_string(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (const char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escape[8];
                    std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
                    out += escape;
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

// ---- Recorder ----------------------------------------------------------------------------

int Recorder::create(int directory, Setup setup, std::unique_ptr<Recorder>& out) {
    // As asciinema writes it: its key order and separators.
    std::string line = "{\"version\": 2, \"width\": " + std::to_string(setup.size.cols) +
                       ", \"height\": " + std::to_string(setup.size.rows) +
                       ", \"timestamp\": " + std::to_string(setup.timestamp) +
                       ", \"command\": " + json_string(utf8::replace_invalid(setup.command)) + ", \"env\": {";
    if (setup.term) line += "\"TERM\": " + json_string(utf8::replace_invalid(*setup.term));
    line += "}}\n";

    UniqueFd file(::openat(directory, setup.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!file) return -errno;
    const std::uint64_t start = setup.clock();
    std::unique_ptr<Recorder> recorder(new Recorder(std::move(file), std::move(setup), start, 0));
    if (const int r = recorder->write_all(line); r < 0) {
        recorder->file_.reset();
        recorder->setup_.closed = nullptr;
        ::unlinkat(directory, recorder->setup_.name.c_str(), 0);  // ours: O_EXCL made it
        return r;
    }
    out = std::move(recorder);
    return 0;
}

Recorder::Recorder(UniqueFd file, Setup setup, std::uint64_t start_usec, std::uint64_t written)
    : file_(std::move(file)), setup_(std::move(setup)), start_usec_(start_usec), written_(written) {}

Recorder::~Recorder() { finish(); }

void Recorder::output(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) {
    if (!file_) return;
    text_.clear();
    decoder_.decode(first, text_);
    decoder_.decode(second, text_);
    if (!text_.empty()) event("o", text_);
}

void Recorder::resize(protocol::WindowSize size) {
    if (!file_ || size == setup_.size) return;
    setup_.size = size;
    event("r", std::to_string(size.cols) + "x" + std::to_string(size.rows));
}

void Recorder::finish() {
    if (!file_) return;
    text_.clear();
    decoder_.flush(text_);
    if (!text_.empty()) event("o", text_);
    close();
}

void Recorder::event(const char* type, std::string_view text) {
    const std::uint64_t now = setup_.clock();
    const std::string time = seconds_text(now > start_usec_ ? now - start_usec_ : 0);
    std::string line = "[" + time + ", \"" + type + "\", " + json_string(text) + "]\n";
    std::string why;
    if (written_ + line.size() + kMarkerRoom <= setup_.max_bytes) {
        if (!setup_.room || setup_.room(line.size(), why)) {
            if (const int r = write_all(line); r < 0) stop(r);
            return;
        }
    } else {
        why = "it reached max_bytes (" + std::to_string(setup_.max_bytes) + ")";
    }
    // The marker goes in the room kept for it, past the directory's bounds too: a reader
    // must see why the recording ends.
    line = "[" + time + ", \"m\", " + json_string("recording stopped: " + why) + "]\n";
    if (const int r = write_all(line); r < 0) return stop(r);
    if (why.starts_with("it reached max_bytes"))
        log_warning("session recording stopped at its size limit",
                    {{"RECORDING", setup_.path}, {"MAX_BYTES", std::to_string(setup_.max_bytes)}});
    else
        log_warning("session recording stopped: the recordings have no room", {{"RECORDING", setup_.path}, {"REASON", why}});
    close();
}

// All of `data`: 0, or -errno. written_ counts what was written in full.
int Recorder::write_all(std::string_view data) {
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(file_.get(), data.data() + done, data.size() - done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -errno : -EIO;
    }
    written_ += data.size();
    return 0;
}

// A write failed: the recording ends with its last whole line; the session goes on.
void Recorder::stop(int error) {
    [[maybe_unused]] const int r = ::ftruncate(file_.get(), static_cast<off_t>(written_));  // best effort
    log_warning("session recording stopped: cannot write",
                {{"RECORDING", setup_.path}, {"ERROR", std::strerror(-error)}});
    close();
}

void Recorder::close() {
    file_.reset();
    if (auto closed = std::move(setup_.closed)) {
        setup_.closed = nullptr;
        closed();
    }
}

// ---- Recordings --------------------------------------------------------------------------

Recordings::Recordings(Recording config, sd_event* event) : config_(std::move(config)), event_(event) {}

Recordings::~Recordings() = default;

int Recordings::init() {
    if (config_.directory.empty()) return 0;
    if (const int r = open_private_directory(config_.directory, directory_); r < 0) return r;
    log_info("recording sessions",
             {{"DIRECTORY", config_.directory}, {"MAX_BYTES", std::to_string(config_.max_bytes)},
              {"MAX_TOTAL_BYTES", std::to_string(config_.max_total_bytes)},
              {"RETENTION_S", std::to_string(config_.retention.count())}});
    expire();
    const std::int64_t size = recordings_size(directory_.get());
    if (size < 0) return static_cast<int>(size);
    total_ = static_cast<std::uint64_t>(size);
    return 0;
}

bool Recordings::room(std::size_t bytes, std::string& why) {
    if (total_ + bytes > config_.max_total_bytes) {
        why = "the recordings reached max_total_bytes (" + std::to_string(config_.max_total_bytes) + ")";
    } else if (since_free_check_ + bytes >= kFreeCheckBytes && !enough_free_space(why)) {
        // why is set
    } else {
        since_free_check_ = since_free_check_ + bytes >= kFreeCheckBytes ? 0 : since_free_check_ + bytes;
        total_ += bytes;
        full_ = false;
        return true;
    }
    if (!full_) log_warning("session recordings stop: no room", {{"DIRECTORY", config_.directory}, {"REASON", why}});
    full_ = true;
    return false;
}

bool Recordings::enough_free_space(std::string& why) {
    struct statvfs fs{};
    if (::fstatvfs(directory_.get(), &fs) < 0) {
        why = std::string("cannot read the file system's free space: ") + std::strerror(errno);
        return false;
    }
    // f_bavail: what others may still use; root's reserved blocks are not counted as room.
    // In blocks: no product overflows (f_blocks < 2^64 / 100 on any file system there is).
    const std::uint64_t block = fs.f_frsize ? fs.f_frsize : 1;
    const std::uint64_t keep_blocks = fs.f_blocks / 100 * config_.keep_free_percent + kFreeCheckBytes / block;
    if (fs.f_bavail >= keep_blocks) return true;
    why = "the file system has less than keep_free_percent (" + std::to_string(config_.keep_free_percent) + "%) free";
    return false;
}

std::unique_ptr<Recorder> Recordings::start(const std::string& id, const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env, protocol::WindowSize size) {
    if (!directory_) return nullptr;
    Recorder::Setup setup;
    setup.name = id + ".cast";
    setup.path = config_.directory + "/" + setup.name;
    setup.size = size;
    setup.timestamp = static_cast<std::int64_t>(std::time(nullptr));
    for (const auto& arg : argv) setup.command += (setup.command.empty() ? "" : " ") + arg;
    for (const auto& entry : env)
        if (entry.starts_with("TERM=")) {
            setup.term = entry.substr(5);
            break;
        }
    setup.max_bytes = config_.max_bytes;
    setup.clock = [event = event_] { return now_usec(event); };
    setup.closed = [this, name = setup.name] { open_.erase(name); };
    setup.room = [this](std::size_t bytes, std::string& why) { return room(bytes, why); };
    const std::string name = setup.name, path = setup.path;
    if (std::string why; !room(Recorder::kMarkerRoom * 4, why)) {
        log_warning("cannot record a session; it runs unrecorded", {{"SESSION", id}, {"RECORDING", path}, {"ERROR", why}});
        return nullptr;
    }
    std::unique_ptr<Recorder> recorder;
    if (const int r = Recorder::create(directory_.get(), std::move(setup), recorder); r < 0) {
        log_warning("cannot record a session; it runs unrecorded",
                    {{"SESSION", id}, {"RECORDING", path}, {"ERROR", std::strerror(-r)}});
        return nullptr;
    }
    open_.insert(name);
    return recorder;
}

void Recordings::expire() {
    if (config_.retention.count() == 0) return;  // kept forever
    const std::time_t cutoff = std::time(nullptr) - static_cast<std::time_t>(config_.retention.count());
    std::uint64_t freed = 0;
    const int deleted = delete_expired_recordings(directory_.get(), cutoff, open_, &freed);
    total_ -= std::min(total_, freed);
    if (deleted < 0)
        log_error_errno(deleted, "cannot delete expired session recordings", {{"DIRECTORY", config_.directory}});
    else if (deleted > 0)
        log_info("expired session recordings deleted",
                 {{"DIRECTORY", config_.directory}, {"COUNT", std::to_string(deleted)}});
    if (const int r = rearm_timer(event_, expiry_timer_, kExpiryIntervalUsec, [this] { expire(); }); r < 0)
        log_error_errno(r, "cannot schedule the deletion of expired session recordings; they are kept",
                        {{"DIRECTORY", config_.directory}});
}

int delete_expired_recordings(int directory, std::time_t cutoff, const std::set<std::string>& keep,
                              std::uint64_t* freed) {
    UniqueFd dup(::openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dup) return -errno;
    DIR* d = ::fdopendir(dup.get());
    if (!d) return -errno;
    (void)dup.release();  // closedir() closes it
    std::vector<std::pair<std::string, std::uint64_t>> expired;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() <= 5 || !name.ends_with(".cast") || keep.contains(name)) continue;
        struct stat st{};
        if (::fstatat(directory, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (S_ISREG(st.st_mode) && st.st_mtime < cutoff) expired.emplace_back(name, static_cast<std::uint64_t>(st.st_size));
    }
    ::closedir(d);
    int deleted = 0;
    for (const auto& [name, size] : expired)
        if (::unlinkat(directory, name.c_str(), 0) == 0) {
            ++deleted;
            if (freed) *freed += size;
        }
    return deleted;
}

std::int64_t recordings_size(int directory) {
    UniqueFd dup(::openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dup) return -errno;
    DIR* d = ::fdopendir(dup.get());
    if (!d) return -errno;
    (void)dup.release();  // closedir() closes it
    std::int64_t total = 0;
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        if (name.size() <= 5 || !name.ends_with(".cast")) continue;
        struct stat st{};
        if (::fstatat(directory, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
    }
    ::closedir(d);
    return total;
}

UniqueFd Recordings::open_for_reading(const std::string& id) const {
    if (!directory_.valid() || id.empty() || id.find('/') != std::string::npos || id[0] == '.') return {};
    const std::string name = id + ".cast";
    return UniqueFd(::openat(directory_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
}

}  // namespace ptyvisor::server
