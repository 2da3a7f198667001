#include "backends/direct/session_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <sstream>

#include "common/process.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends::direct {

SessionRecords::SessionRecords(std::string state_directory)
    : directory_(std::move(state_directory) + "/sessions") {}

int SessionRecords::prepare() const {
    const auto parent = directory_.substr(0, directory_.rfind('/'));
    for (const auto& dir : {parent, directory_})
        if (::mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) return errno;
    return 0;
}

int SessionRecords::write(const SessionRecord& r) const {
    std::ostringstream text;
    text << "unit=" << r.unit << "\ncgroup=" << r.cgroup << "\nleader=" << r.leader
         << "\nstart_time=" << r.start_time << "\n";
    const std::string data = text.str();
    const std::string path = directory_ + "/" + r.unit;
    const std::string temp = path + ".tmp";
    {
        UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (!fd) return errno;
        if (::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size()))
            return errno ? errno : EIO;
    }
    if (::rename(temp.c_str(), path.c_str()) < 0) return errno;
    return 0;
}

void SessionRecords::remove(const std::string& unit) const {
    ::unlink((directory_ + "/" + unit).c_str());
}

std::vector<SessionRecord> SessionRecords::list() const {
    std::vector<SessionRecord> out;
    DIR* d = ::opendir(directory_.c_str());
    if (!d) return out;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        const auto text = read_small_file(directory_ + "/" + name);
        if (!text) continue;
        SessionRecord r;
        std::istringstream lines(*text);
        for (std::string line; std::getline(lines, line);) {
            const auto eq = line.find('=');
            if (eq == std::string::npos) continue;
            const auto key = line.substr(0, eq), value = line.substr(eq + 1);
            if (key == "unit") r.unit = value;
            else if (key == "cgroup") r.cgroup = value;
            else if (key == "leader") r.leader = static_cast<pid_t>(std::atol(value.c_str()));
            else if (key == "start_time") r.start_time = std::strtoull(value.c_str(), nullptr, 10);
        }
        if (r.unit.empty()) r.unit = name;  // a torn record: still clean what it names
        out.push_back(std::move(r));
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
