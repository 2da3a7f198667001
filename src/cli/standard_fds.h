// Makes sure descriptors 0, 1 and 2 are open before anything else is opened, so that a
// socket can never land on "stdin" or a message on "stderr" when we were started with
// them closed (`ptyvisor run cmd <&-`).
#pragma once

namespace ptyvisor::cli {

// Opens /dev/null on each of 0, 1, 2 that is closed. These stay open for the life of the
// process, as standard streams do, so they are deliberately not held in a UniqueFd.
void ensure_standard_fds();

}  // namespace ptyvisor::cli
