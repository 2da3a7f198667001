// BlockingWorker: the system calls a client can make block, run off the event loop.
//
// A client can hand the daemon a descriptor whose close() blocks (a TCP socket with
// SO_LINGER and a full send queue; a FUSE file whose FLUSH is never answered), or name a
// path whose stat() blocks (a FUSE mount that it serves and never answers). None of these
// may run on the loop, which serves every other client. They run here, on a few threads
// that carry the agent's file-system identity (fsuid, fsgid and groups, which Linux keeps
// per thread), so that a path is judged as the agent would see it: a command in a
// directory the agent cannot search is "not found", never a probe of what root can see.
//
// Invariants:
//  - The loop never waits for a worker. Results come back through an eventfd, and each
//    completion runs on the loop, and only while its owner still holds it (weak_ptr).
//  - Whatever a job owns (descriptors above all) is destroyed on a worker thread.
//  - At most kMaxThreads threads. A thread stuck for good in the kernel is lost, and then
//    later jobs wait: that only delays, and through the caller's deadlines refuses, the
//    requests of the agent that set the trap. backlog() counts the jobs not yet done, so
//    that admission can refuse a client that keeps feeding it.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/event.h"
#include "common/unique_fd.h"

namespace ptyvisor::server {

class BlockingWorker {
public:
    static constexpr std::size_t kMaxThreads = 4;

    // The file-system identity worker threads take on.
    struct Identity {
        uid_t uid = 0;
        gid_t gid = 0;
        std::vector<gid_t> groups;
    };
    using Completion = std::function<void()>;

    BlockingWorker(sd_event* loop, Identity identity);
    ~BlockingWorker();
    BlockingWorker(const BlockingWorker&) = delete;
    BlockingWorker& operator=(const BlockingWorker&) = delete;

    // Watches for completions on the loop. Returns 0 or a negative errno; until it has
    // succeeded, jobs run but no completion does.
    int init();

    // Which jobs go first. A client waits for a Request (the checks of its START); nobody
    // waits for Cleanup (closing what clients handed over or left behind), and a connection
    // flood queues it by the thousand. Requests run before any queued cleanup, in the order
    // they came; cleanup in the order it came.
    enum class Lane { Cleanup, Request };

    // Runs `work` on a worker thread, then `*done` on the loop unless its owner has let it go.
    // `work` must not throw and must touch nothing the loop uses.
    void submit(std::function<void()> work, std::weak_ptr<Completion> done = {}, Lane lane = Lane::Cleanup);

    // Closes descriptors on a worker thread; then `*done` on the loop, as for submit().
    void dispose(std::vector<UniqueFd> fds, std::weak_ptr<Completion> done = {});
    void dispose(UniqueFd fd);

    // Jobs submitted and not yet finished (queued, running or stuck).
    [[nodiscard]] std::size_t backlog() const;

    // The queue and its threads (blocking_worker.cpp); public only so that its threads,
    // which may outlive this object, can name it.
    struct Shared;

private:
    void on_completions();

    sd_event* loop_;
    std::shared_ptr<Shared> shared_;
    EventSource source_;
    // The threads started, each with its flag "has left run_thread()" (set under Shared's
    // mutex). Those that have left are joined at the next submit(); the rest at destruction
    // if they leave in time, else detached.
    std::vector<std::pair<std::thread, std::shared_ptr<bool>>> threads_;
};

}  // namespace ptyvisor::server
