// Directories of the daemon's own that no one else may write: the direct backend's session
// records, the session recordings. Reached through a descriptor, never by a symlink at their
// last component, and checked after opening, so that what is checked is what is used.
#pragma once

#include <string>

#include "common/unique_fd.h"

namespace ptyvisor {

// Whether `fd` is owned by this process's effective uid (root, for the daemon) and writable
// by neither group nor others. Returns 0, -EPERM when it is not, or -errno from fstat(2).
int check_private_directory(int fd);

// Creates `name` under `parent` (mode 0700) unless something is there, opens it with
// O_DIRECTORY | O_NOFOLLOW and checks it (check_private_directory). Returns 0 with the
// descriptor in `out`, or -errno: -ENOTDIR (or -ELOOP) for a symlink or a non-directory,
// -EPERM for a directory that is not ours alone; `out` is then untouched.
int open_private_directory(int parent, const std::string& name, UniqueFd& out);

// The same for an absolute `path`. Its parent must exist and is reached as any path is
// (symlinks followed: the administrator chose it); only the last component is created,
// refused as a symlink and checked. -EINVAL for a path that is not absolute or names "/".
int open_private_directory(const std::string& path, UniqueFd& out);

// What a failure of the functions above means, for a message after "PATH: ": "a symlink or
// not a directory", "a directory that is not root's alone (...)", or strerror(-r).
std::string private_directory_error(int r);

}  // namespace ptyvisor
