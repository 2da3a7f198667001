// OutputBatch: lets a bulk (flooding) session's output wait, so that it is sent in batches.
//
// Sending each read as it comes costs the receiver and the daemon a wakeup per read, which
// on a loaded machine costs more than the bytes. So output may wait until `max_bytes` have
// come, or `max_delay_usec` after the first byte that waited, whichever is first; then
// `on_due` runs and the owner sends whatever has come. Whether the output is bulk at all
// is the owner's to decide: interactive output never asks to wait.
//
// Invariants:
//  - The timer runs only while output waits: wait() arms it when it first says yes, and it
//    is disarmed when it fires (before on_due runs, so on_due may arm it again) or by
//    cancel(). Idle output costs nothing.
//  - Nothing waits longer than max_delay_usec after wait() first said yes: a later wait()
//    never pushes the deadline back.
//  - When the timer cannot be armed, wait() says no: batching is a saving, never a reason
//    to hold output.
//  - The timer runs at kBulkEventPriority (bulk_priority.h): behind keystrokes.
#pragma once

#include <cstdint>
#include <functional>

#include "common/event.h"

namespace ptyvisor::server {

class OutputBatch {
public:
    OutputBatch(sd_event* event, std::uint64_t max_bytes, std::uint64_t max_delay_usec, std::function<void()> on_due);
    OutputBatch(const OutputBatch&) = delete;
    OutputBatch& operator=(const OutputBatch&) = delete;

    // Whether output of which `pending_bytes` have not been sent may wait: true when fewer
    // than max_bytes have come and the timer runs (armed now if it did not); false: send it
    // now. The timer keeps running when this says false: on_due then finds little or nothing.
    [[nodiscard]] bool wait(std::uint64_t pending_bytes);
    // Whether output waits for the timer.
    [[nodiscard]] bool armed() const { return armed_; }
    // Nothing waits any more (it was sent, or dropped): on_due will not run.
    void cancel();

private:
    void fire();

    sd_event* event_;
    std::uint64_t max_bytes_, max_delay_usec_;
    std::function<void()> on_due_;
    EventSource timer_;  // created on first use, kept, and enabled only while armed_
    bool armed_ = false;
};

}  // namespace ptyvisor::server
