// The detach keys of `ptyvisor attach`, docker's way: "--detach-keys ctrl-p,ctrl-q" names a
// sequence of keys, each "ctrl-X" (X one of a-z, @, [, \, ], ^, _) or a single character.
// When the sequence appears in what the user types, the client detaches instead of sending
// it. Pure, unit-tested (detach_keys_test.cpp).
#pragma once

#include <string>
#include <string_view>

namespace ptyvisor::cli {

// docker's default.
inline constexpr std::string_view kDefaultDetachKeys = "ctrl-p,ctrl-q";

// The bytes of a detach-keys specification, into `out`; "" names no keys (never detach).
// False with `why` for a malformed one.
bool parse_detach_keys(std::string_view spec, std::string& out, std::string& why);

// Finds the detach sequence in a stream of input, chunk by chunk. Bytes that begin the
// sequence are held back until the next byte shows whether the sequence goes on; if it does
// not, they are passed on as typed. The sequence itself is never passed on.
class DetachKeyFilter {
public:
    explicit DetachKeyFilter(std::string keys) : keys_(std::move(keys)) {}

    // Appends to `forward` what `input` lets through, up to the end of the sequence if it
    // completes in `input` (the rest of `input` is then dropped). True when it completed.
    bool feed(std::string_view input, std::string& forward);

    // The bytes held back: to pass on when input ends.
    [[nodiscard]] std::string_view held() const { return std::string_view(keys_).substr(0, matched_); }

private:
    std::string keys_;
    std::size_t matched_ = 0;  // bytes of keys_ seen last, held back
};

}  // namespace ptyvisor::cli
