// AltScreenWatch: whether a byte stream may switch a terminal to its alternate screen, so that
// the emulator (emulator.h) allocates that screen, a second full set of cells, only then.
//
// libvterm 0.1.4 refuses the switch when its alternate buffer does not exist (its screen's
// settermprop returns 0) and offers no hook before it, so the buffer must exist before the
// bytes that switch are fed. This looks at the bytes first.
//
// Invariant: never misses a switch. Every way to the alternate screen is a DECSET
// (ESC [ ? Pm h) with a parameter of 47, 1047 or 1049; so any CSI with a '?' anywhere in it
// and a run of digits whose value is one of those, or which has more digits than any of them
// (leading zeros, or numbers libvterm would wrap), counts, whatever its final byte. It may
// answer yes for a sequence that does not switch (a DECRQM of 1049, a DECRST): the cost is
// the allocation the emulator made for every session before. ESC always starts over, as it
// does in libvterm's parser, so no sequence can hide a later one. State carries across calls.
#pragma once

#include <cstdint>
#include <string_view>

namespace ptyvisor::screen {

class AltScreenWatch {
  public:
    // True when `bytes`, after what came before, may switch to the alternate screen.
    bool scan(std::string_view bytes);

  private:
    enum class State : std::uint8_t { Ground, Escape, Csi };
    void end_digits();
    State state_ = State::Ground;
    bool question_ = false;   // a '?' in this CSI
    bool candidate_ = false;  // a run of digits in this CSI that may name the alternate screen
    std::uint32_t digits_ = 0, value_ = 0;
};

}  // namespace ptyvisor::screen
