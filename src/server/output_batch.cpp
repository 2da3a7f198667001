#include "server/output_batch.h"

#include <utility>

#include "common/log.h"
#include "server/bulk_priority.h"

namespace ptyvisor::server {

OutputBatch::OutputBatch(sd_event* event, std::uint64_t max_bytes, std::uint64_t max_delay_usec,
                         std::function<void()> on_due)
    : event_(event), max_bytes_(max_bytes), max_delay_usec_(max_delay_usec), on_due_(std::move(on_due)) {}

bool OutputBatch::wait(std::uint64_t pending_bytes) {
    if (pending_bytes >= max_bytes_) return false;
    if (armed_) return true;
    const bool created = !timer_;
    if (const int r = rearm_timer(event_, timer_, max_delay_usec_, [this] { fire(); }); r < 0) {
        log_error_errno(r, "cannot arm an output batch's timer; sending at once");
        return false;
    }
    // Behind keystrokes: only a priority that cannot be set leaves it at the normal one.
    if (created) sd_event_source_set_priority(timer_.get(), kBulkEventPriority);
    armed_ = true;
    return true;
}

void OutputBatch::cancel() {
    if (!armed_) return;
    armed_ = false;
    sd_event_source_set_enabled(timer_.get(), SD_EVENT_OFF);
}

void OutputBatch::fire() {
    armed_ = false;
    on_due_();
}

}  // namespace ptyvisor::server
