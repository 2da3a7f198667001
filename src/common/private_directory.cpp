#include "common/private_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ptyvisor {

int check_private_directory(int fd) {
    struct stat st{};
    if (::fstat(fd, &st) < 0) return -errno;
    if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return -EPERM;
    return 0;
}

int open_private_directory(int parent, const std::string& name, UniqueFd& out) {
    if (::mkdirat(parent, name.c_str(), 0700) < 0 && errno != EEXIST) return -errno;
    UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return -errno;
    if (const int r = check_private_directory(fd.get()); r < 0) return r;
    out = std::move(fd);
    return 0;
}

int open_private_directory(const std::string& path, UniqueFd& out) {
    std::string trimmed = path;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    const auto slash = trimmed.rfind('/');
    if (slash == std::string::npos || trimmed.size() <= 1) return -EINVAL;
    const std::string parent = slash == 0 ? "/" : trimmed.substr(0, slash);
    const UniqueFd up(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!up) return -errno;
    return open_private_directory(up.get(), trimmed.substr(slash + 1), out);
}

std::string private_directory_error(int r) {
    if (r == -ENOTDIR || r == -ELOOP) return "a symlink or not a directory";
    if (r == -EPERM)
        return "a directory that is not root's alone (it must be owned by root, not writable by group or others)";
    return std::strerror(-r);
}

}  // namespace ptyvisor
