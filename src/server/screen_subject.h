// ScreenSubject: what the screen broker (screen_broker.h) needs of a session, and nothing
// more. Session implements it; tests implement it without a daemon.
//
// Invariants the broker relies on: log() is the same OutputLog for the subject's whole life
// and its end() only grows; id() and unit() never change.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "protocol/payloads.h"
#include "server/output_log.h"
#include "server/shell_mark.h"

namespace ptyvisor::server {

class ScreenSubject {
public:
    [[nodiscard]] virtual const std::string& id() const = 0;
    [[nodiscard]] virtual const std::string& unit() const = 0;  // for the log
    [[nodiscard]] virtual const OutputLog& log() const = 0;
    [[nodiscard]] virtual protocol::WindowSize size() const = 0;
    // Whether the terminal floods: then the worker is told of its output in batches.
    [[nodiscard]] virtual bool bulk() const = 0;
    // Whether the controller relays a real terminal, which answers the program's queries
    // itself: then the screen's answers are not written.
    [[nodiscard]] virtual bool controller_has_terminal() const = 0;
    // The screen's answers to the program's queries, written to its terminal as input.
    virtual void answer_queries(std::span<const std::uint8_t> bytes) = 0;
    // A shell's mark in the output, its fields checked against their bounds (shell_mark.h).
    // Marks come in offset order from one worker; a restarted worker replays the log, and
    // with it marks already given: those at offsets seen before are the same marks.
    virtual void shell_mark(const ShellMark& mark) = 0;
    // The worker has read the log up to `offset`: every mark before it has been given.
    virtual void screen_advanced(std::uint64_t offset) = 0;

protected:
    ~ScreenSubject() = default;
};

}  // namespace ptyvisor::server
