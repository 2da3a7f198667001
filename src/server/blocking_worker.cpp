#include "server/blocking_worker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace ptyvisor::server {

// Shared with the threads, which may outlive the worker: a thread stuck in the kernel at
// shutdown is detached, and holds this until it returns (or the process ends).
struct BlockingWorker::Shared {
    struct Job {
        std::function<void()> work;
        std::weak_ptr<Completion> done;
    };

    std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable left;  // a thread has left run_thread()
    std::deque<Job> queue;           // the Request lane's jobs first, then the Cleanup lane's
    std::size_t requests_queued = 0;  // how many jobs at the front of `queue` are requests
    std::vector<std::weak_ptr<Completion>> finished;  // completions for the loop
    std::size_t threads = 0, idle = 0, unfinished = 0;
    bool stopping = false;
    Identity identity;
    UniqueFd eventfd;
};

namespace {

// Takes on the agent's file-system identity for this thread only. glibc's setgroups()
// would change every thread of the process, so the system call is made directly;
// setfsuid() and setfsgid() are per thread already. Leaving fsuid 0 also drops the
// file-system capabilities (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, ...) from this
// thread's effective set, which is the point.
bool take_identity(const BlockingWorker::Identity& id) {
    if (::syscall(SYS_setgroups, id.groups.size(), id.groups.data()) != 0) return false;
    ::setfsgid(id.gid);
    ::setfsuid(id.uid);
    // Both calls return the previous value; -1 is never valid, so these only read.
    return static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) == id.uid &&
           static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) == id.gid;
}

void signal_loop(int eventfd) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(eventfd, &one, sizeof one);
}

void run_thread(const std::shared_ptr<BlockingWorker::Shared>& s, bool& has_left) {
    const bool identity_ok = take_identity(s->identity);
    std::unique_lock lock(s->mutex);
    if (!identity_ok) {
        // Runs no job: one that judged a path as root would be the probe this prevents.
        --s->threads;
        has_left = true;
        s->left.notify_all();
        lock.unlock();
        log_error("worker thread cannot take the agent's file-system identity");
        return;
    }
    for (;;) {
        ++s->idle;
        s->wake.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
        --s->idle;
        if (s->queue.empty()) break;  // stopping, and nothing is left to close
        auto job = std::move(s->queue.front());
        s->queue.pop_front();
        if (s->requests_queued > 0) --s->requests_queued;
        lock.unlock();
        job.work();
        job.work = nullptr;  // what the job owned is destroyed here, on this thread
        lock.lock();
        --s->unfinished;
        if (!job.done.expired()) {
            s->finished.push_back(std::move(job.done));
            signal_loop(s->eventfd.get());
        }
    }
    --s->threads;
    has_left = true;
    s->left.notify_all();
}

}  // namespace

BlockingWorker::BlockingWorker(sd_event* loop, Identity identity) : loop_(loop), shared_(std::make_shared<Shared>()) {
    shared_->identity = std::move(identity);
}

int BlockingWorker::init() {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!fd) return -errno;
    const int r = add_io(loop_, source_, fd.get(), EPOLLIN, [this](std::uint32_t) { on_completions(); });
    if (r < 0) return r;
    std::lock_guard lock(shared_->mutex);  // threads write to it
    shared_->eventfd = std::move(fd);
    return 0;
}

BlockingWorker::~BlockingWorker() {
    source_.reset();
    std::unique_lock lock(shared_->mutex);
    shared_->stopping = true;
    // Threads finish what is queued (closing what it owns), then leave. No completion
    // runs any more: the loop is going away.
    shared_->wake.notify_all();
    // Wait a little for them, so that in the common case the daemon exits with every
    // descriptor it was handed closed and every thread joined (valgrind.sh checks both).
    // Bounded: a close() an agent made block for good must not hold the shutdown, so a
    // thread still busy after that is left running, as before, until the process ends.
    const bool all_left = shared_->left.wait_for(lock, std::chrono::seconds(1), [&] { return shared_->threads == 0; });
    lock.unlock();
    for (auto& [thread, has_left] : threads_) {
        if (all_left)
            thread.join();  // it has left run_thread(): the join only waits for its return
        else
            thread.detach();
    }
}

void BlockingWorker::submit(std::function<void()> work, std::weak_ptr<Completion> done, Lane lane) {
    std::lock_guard lock(shared_->mutex);
    // Join the threads that have left (only after a failure to take the identity), so
    // that they do not pile up unjoined.
    std::erase_if(threads_, [](auto& entry) {
        if (!*entry.second) return false;
        entry.first.join();
        return true;
    });
    if (lane == Lane::Request) {
        const auto behind_requests = shared_->queue.begin() + static_cast<std::ptrdiff_t>(shared_->requests_queued);
        shared_->queue.insert(behind_requests, {std::move(work), std::move(done)});
        ++shared_->requests_queued;
    } else {
        shared_->queue.push_back({std::move(work), std::move(done)});
    }
    ++shared_->unfinished;
    // A thread per queued job, up to the cap: a job never waits behind one that blocks
    // while a thread could still be had. (An idle thread already woken for an earlier job
    // still counts as idle until it takes it, hence the comparison with the queue.)
    if (shared_->queue.size() > shared_->idle && shared_->threads < kMaxThreads) {
        try {
            auto has_left = std::make_shared<bool>(false);
            threads_.emplace_back(std::thread([s = shared_, has_left] { run_thread(s, *has_left); }), has_left);
            ++shared_->threads;
        } catch (const std::system_error&) {
            // No thread now: the job waits for one to be free, or for the next submit.
        }
    }
    shared_->wake.notify_one();
}

void BlockingWorker::dispose(std::vector<UniqueFd> fds, std::weak_ptr<Completion> done) {
    auto owned = std::make_shared<std::vector<UniqueFd>>(std::move(fds));
    submit([owned] { owned->clear(); }, std::move(done));
}

void BlockingWorker::dispose(UniqueFd fd) {
    if (!fd) return;
    std::vector<UniqueFd> one;
    one.push_back(std::move(fd));
    dispose(std::move(one));
}

std::size_t BlockingWorker::backlog() const {
    std::lock_guard lock(shared_->mutex);
    return shared_->unfinished;
}

void BlockingWorker::on_completions() {
    std::uint64_t count = 0;
    [[maybe_unused]] const auto n = ::read(shared_->eventfd.get(), &count, sizeof count);
    std::vector<std::weak_ptr<Completion>> ready;
    {
        std::lock_guard lock(shared_->mutex);
        ready.swap(shared_->finished);
    }
    for (auto& weak : ready)
        if (const auto done = weak.lock()) (*done)();
}

}  // namespace ptyvisor::server
