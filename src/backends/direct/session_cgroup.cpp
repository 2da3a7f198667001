#include "backends/direct/session_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/process.h"

namespace ptyvisor::backends::direct {

std::optional<CgroupRoot> CgroupRoot::open(const std::string& instance) {
    const auto mount = cgroup2_mount();
    const auto own = own_cgroup();
    if (!mount || !own) return std::nullopt;
    CgroupRoot root;
    root.all_sessions_ = (*own == "/" ? std::string() : *own) + "/ptyvisor.sessions";
    root.relative_ = root.all_sessions_ + "/" + instance;
    root.path_ = *mount + root.relative_;
    for (const auto& dir : {*mount + root.all_sessions_, root.path_})
        if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) return std::nullopt;
    // cgroup.kill (Linux 5.14) is what makes ending a session atomic; without it we fall back.
    if (::access((root.path_ + "/cgroup.kill").c_str(), W_OK) < 0) return std::nullopt;
    return root;
}

std::vector<std::string> CgroupRoot::children() const {
    std::vector<std::string> out;
    DIR* d = ::opendir(path_.c_str());
    if (!d) return out;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (e->d_type == DT_DIR && name != "." && name != "..") out.push_back(path_ + "/" + name);
    }
    ::closedir(d);
    return out;
}

int create_session_cgroup(const CgroupRoot& root, const std::string& name, std::string& path) {
    std::string created = root.path() + "/" + name;
    if (::mkdir(created.c_str(), 0755) < 0) return -errno;
    path = std::move(created);
    return 0;
}

int kill_cgroup(const std::string& path) {
    UniqueFd fd(::open((path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return errno == ENOENT ? 0 : -errno;
    if (::write(fd.get(), "1", 1) != 1) return -errno;
    return 0;
}

bool cgroup_empty(const std::string& path) {
    const auto events = read_small_file(path + "/cgroup.events");
    if (!events) return true;  // gone
    return events->find("populated 0") != std::string::npos;
}

int remove_cgroup(const std::string& path) {
    if (::rmdir(path.c_str()) < 0 && errno != ENOENT) return -errno;
    return 0;
}

std::vector<pid_t> cgroup_pids(const std::string& path) {
    std::vector<pid_t> pids;
    const auto text = read_small_file(path + "/cgroup.procs");
    if (!text) return pids;
    const char* p = text->c_str();
    char* end = nullptr;
    for (long v = std::strtol(p, &end, 10); end != p; v = std::strtol(p, &end, 10)) {
        pids.push_back(static_cast<pid_t>(v));
        p = end;
    }
    return pids;
}

std::string allowed_unit_cgroup(const std::string& unit) { return "/system.slice/" + unit; }

bool in_allowed_unit(const std::string& peer_cgroup, const std::vector<std::string>& units) {
    for (const auto& unit : units)
        if (peer_cgroup == allowed_unit_cgroup(unit)) return true;
    return false;
}

}  // namespace ptyvisor::backends::direct
