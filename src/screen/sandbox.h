// The screen worker's confinement (docs/security.md, "The screen"), applied once at
// start, while still root, before a byte of session output is read:
//   1. every descriptor but 0-3 closed; the process dies with its parent; nice 10, so that
//      on a busy machine the relay goes first;
//   2. root directory: an empty directory that no longer exists (made in $RUNTIME_DIRECTORY
//      under systemd, else /tmp; entered, removed, chroot(".")): nothing to open, and
//      nothing can be created in it;
//   3. a uid and gid of its own (the daemon picks them: server/screen_identity.h), or the
//      account `user` an administrator chose: supplementary groups dropped, then
//      setresgid/setresuid, checked irreversible; no capabilities remain;
//   4. PR_SET_NO_NEW_PRIVS, not dumpable, RLIMIT_FSIZE and RLIMIT_NPROC 0;
//   5. a seccomp allow-list (kill the process on anything else): read/write/recvmsg/
//      sendmsg/sendto/poll on descriptors it holds, memory management without PROT_EXEC,
//      close, exit.
//      No open, openat, socket, connect, execve, fork, clone, ptrace, kill.
#pragma once

#include <sys/types.h>

#include <string>

namespace ptyvisor::screen {

// False with `why` if any step fails; the caller must then exit without reading anything.
bool enter_sandbox(const std::string& user, std::string& why);
bool enter_sandbox(uid_t uid, gid_t gid, std::string& why);

}  // namespace ptyvisor::screen
