#include "backends/direct/session_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string_view>

#include "common/log.h"
#include "common/private_directory.h"
#include "common/process.h"

namespace ptyvisor::backends::direct {
namespace {

constexpr std::size_t kMaxRecordBytes = 4096;

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// "<prefix>-<32 lowercase hex digits>.service", exactly as the server names sessions (the
// systemd backend's is_session_unit_name holds the same rule). Nothing else is a file name
// in the records directory or a cgroup we made: no "/", no "..".
bool is_session_unit_name(std::string_view name, std::string_view prefix) {
    constexpr std::string_view suffix = ".service";
    if (prefix.empty() || name.size() != prefix.size() + 1 + 32 + suffix.size()) return false;
    if (name.substr(0, prefix.size()) != prefix || name[prefix.size()] != '-') return false;
    for (const char c : name.substr(prefix.size() + 1, 32))
        if (!is_lower_hex(c)) return false;
    return name.substr(prefix.size() + 33) == suffix;
}

template <typename T>
bool parse_number(const std::string& text, T& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::optional<std::string> invalid_record_reason(const SessionRecord& r, const RecordRules& rules) {
    if (!is_session_unit_name(r.unit, rules.unit_prefix))
        return "unit is not a session unit name of prefix \"" + rules.unit_prefix + "\"";
    if (!r.cgroup.empty()) {
        if (rules.cgroup_root.empty()) return "names a cgroup, and this daemon has none";
        // Exactly what create_session_cgroup() makes: nothing outside our instance, no "..".
        if (r.cgroup != rules.cgroup_root + "/" + r.unit)
            return "cgroup is not " + rules.cgroup_root + "/<unit>";
        return std::nullopt;
    }
    // kill(-1) would signal every process there is; PID 1 is never a session of ours.
    if (r.leader <= 1) return "leader is not a PID above 1";
    if (r.start_time == 0) return "no start time for the leader";
    return std::nullopt;
}

SessionRecords::SessionRecords(std::string state_directory, RecordRules rules)
    : state_directory_(std::move(state_directory)), rules_(std::move(rules)) {}

int SessionRecords::prepare() {
    UniqueFd state;
    if (const int r = open_private_directory(state_directory_, state); r < 0) return r;
    if (const int r = open_private_directory(state.get(), "sessions", directory_); r < 0) return r;
    return 0;
}

int SessionRecords::write(const SessionRecord& r) const {
    if (!directory_) return -EBADF;
    if (invalid_record_reason(r, rules_)) return -EINVAL;  // never write what list() would refuse
    std::ostringstream text;
    text << "unit=" << r.unit << "\ncgroup=" << r.cgroup << "\nleader=" << r.leader
         << "\nstart_time=" << r.start_time << "\n";
    const std::string data = text.str();
    const std::string temp = r.unit + ".tmp";
    {
        UniqueFd fd(::openat(directory_.get(), temp.c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!fd) return -errno;
        const ssize_t n = ::write(fd.get(), data.data(), data.size());
        if (n < 0) return -errno;
        if (static_cast<std::size_t>(n) != data.size()) return -EIO;
    }
    if (::renameat(directory_.get(), temp.c_str(), directory_.get(), r.unit.c_str()) < 0) return -errno;
    return 0;
}

void SessionRecords::remove(const std::string& unit) const {
    if (!directory_ || !is_session_unit_name(unit, rules_.unit_prefix)) return;
    ::unlinkat(directory_.get(), unit.c_str(), 0);
}

// One entry, by its name in the directory: a regular file of ours, no symlink, small, with
// each key once and nothing else, naming the unit its file is named for.
std::optional<SessionRecord> SessionRecords::read(const std::string& name, std::string& why) const {
    UniqueFd fd(::openat(directory_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
        why = errno == ELOOP ? "a symlink" : std::string("cannot open: ") + std::strerror(errno);
        return std::nullopt;
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
        st.st_nlink != 1 || st.st_size > static_cast<off_t>(kMaxRecordBytes)) {
        why = "not a small regular file of ours with one name";
        return std::nullopt;
    }
    char buf[kMaxRecordBytes + 1];
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 || static_cast<std::size_t>(n) > kMaxRecordBytes) {
        why = "unreadable or too large";
        return std::nullopt;
    }
    SessionRecord r;
    std::set<std::string> seen;
    std::istringstream lines(std::string(buf, static_cast<std::size_t>(n)));
    for (std::string line; std::getline(lines, line);) {
        const auto eq = line.find('=');
        const auto key = line.substr(0, eq);
        const auto value = eq == std::string::npos ? std::string() : line.substr(eq + 1);
        bool ok = eq != std::string::npos && seen.insert(key).second;
        if (!ok) {
        } else if (key == "unit") r.unit = value;
        else if (key == "cgroup") r.cgroup = value;
        else if (key == "leader") ok = parse_number(value, r.leader);
        else if (key == "start_time") ok = parse_number(value, r.start_time);
        else ok = false;
        if (!ok) {
            why = "malformed line: " + line.substr(0, 80);
            return std::nullopt;
        }
    }
    if (seen.size() != 4) {
        why = "incomplete";
        return std::nullopt;
    }
    if (r.unit != name) {
        why = "its unit is not its file name";
        return std::nullopt;
    }
    if (auto reason = invalid_record_reason(r, rules_)) {
        why = std::move(*reason);
        return std::nullopt;
    }
    return r;
}

std::vector<SessionRecord> SessionRecords::list() const {
    std::vector<SessionRecord> out;
    if (!directory_) return out;
    UniqueFd dup(::openat(directory_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* d = dup ? ::fdopendir(dup.get()) : nullptr;
    if (!d) return out;
    (void)dup.release();  // closedir() closes it
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string why;
        if (auto r = read(name, why)) {
            out.push_back(std::move(*r));
            continue;
        }
        // Never acted upon: only the entry itself goes, by its own name in our directory.
        log_warning("removing an invalid session record", {{"RECORD", name}, {"REASON", why}});
        ::unlinkat(directory_.get(), name.c_str(), 0);
    }
    ::closedir(d);
    return out;
}

std::optional<std::uint64_t> process_start_time(pid_t pid) {
    const auto text = read_small_file("/proc/" + std::to_string(pid) + "/stat");
    if (!text) return std::nullopt;
    const auto close = text->rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(text->substr(close + 2));
    std::string field;
    // Field 3 (state) is the first after ")"; start time is field 22.
    for (int i = 3; i <= 22 && fields >> field; ++i)
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    return std::nullopt;
}

}  // namespace ptyvisor::backends::direct
