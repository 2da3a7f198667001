// The event priority of a bulk session's work: its terminal, and the batches of its output
// that wait (output_batch.h). sd-event dispatches lower values first, so bulk work waits
// behind every interactive terminal and client connection.
#pragma once

#include <cstdint>

namespace ptyvisor::server {

inline constexpr std::int64_t kBulkEventPriority = 10;  // SD_EVENT_PRIORITY_NORMAL + 10

}  // namespace ptyvisor::server
