// RawMode: puts a terminal in raw mode and puts it back.
//
// Invariant: while a RawMode object is alive and active, the terminal is raw; when it is
// destroyed (normal return, stack unwinding, or after a signal that the event loop turned
// into an orderly exit), the terminal's saved attributes are restored. Like systemd's
// ptyfwd, only input processing is made raw: output processing (c_oflag) is kept, so that
// messages printed by the client itself still start at column 0.
#pragma once

#include <termios.h>

#include <optional>

namespace ptyvisor::cli {

class RawMode {
public:
    // Raw mode on `fd` if it is a terminal, held by `out`; `out` stays empty if it is not.
    // Returns 0, or a negative errno if the terminal refuses the change.
    static int enter(int fd, std::optional<RawMode>& out);

    RawMode(RawMode&& other) noexcept;
    RawMode& operator=(RawMode&&) = delete;
    RawMode(const RawMode&) = delete;
    RawMode& operator=(const RawMode&) = delete;
    ~RawMode();

    // Restores the saved attributes now; the destructor then does nothing.
    void restore() noexcept;

    [[nodiscard]] const termios& saved() const { return saved_; }

private:
    RawMode(int fd, const termios& saved) : fd_(fd), saved_(saved) {}

    int fd_ = -1;  // borrowed; -1 once restored or moved from
    termios saved_{};
};

// The attributes RawMode::enter applies, given the terminal's current ones.
termios raw_attributes(const termios& current);

}  // namespace ptyvisor::cli
