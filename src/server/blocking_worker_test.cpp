// BlockingWorker: a job that blocks delays no other, descriptors are closed off the loop, and
// paths are judged with the agent's file-system identity.
#include "server/blocking_worker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ptyvisor::server {
namespace {

using Completion = BlockingWorker::Completion;

class BlockingWorkerTest : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(sd_event_new(&event_), 0); }
    void TearDown() override { sd_event_unref(event_); }

    // Runs the loop until `done` or 10 s.
    bool run_until(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            if (sd_event_run(event_, 100'000) < 0) return false;
        }
        return true;
    }

    sd_event* event_ = nullptr;
};

TEST_F(BlockingWorkerTest, AJobThatBlocksDelaysNoOther) {
    BlockingWorker worker(event_, {::getuid(), ::getgid(), {}});
    ASSERT_EQ(worker.init(), 0);
    int gate[2];
    ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    UniqueFd gate_read(gate[0]), gate_write(gate[1]);
    // The first job waits on the gate, as a close() that lingers would.
    std::atomic<bool> first_done{false};
    auto first = std::make_shared<Completion>([&] { first_done = true; });
    worker.submit([fd = gate_read.get()] {
        char c;
        [[maybe_unused]] const auto n = ::read(fd, &c, 1);
    }, first);
    bool second_done = false;
    auto second = std::make_shared<Completion>([&] { second_done = true; });
    worker.submit([] {}, second);
    EXPECT_TRUE(run_until([&] { return second_done; })) << "the second job waited behind the first";
    EXPECT_FALSE(first_done);
    EXPECT_EQ(worker.backlog(), 1u);
    ASSERT_EQ(::write(gate_write.get(), "x", 1), 1);
    EXPECT_TRUE(run_until([&] { return first_done.load(); }));
    EXPECT_EQ(worker.backlog(), 0u);
}

// Under a connection flood the queue fills with closes; a START's check, which a client
// waits for, must not wait behind them.
TEST_F(BlockingWorkerTest, RequestsRunBeforeQueuedCleanupInTheOrderTheyCame) {
    BlockingWorker worker(event_, {::getuid(), ::getgid(), {}});
    ASSERT_EQ(worker.init(), 0);
    int gate[2];
    ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    UniqueFd gate_read(gate[0]), gate_write(gate[1]);
    // Every thread busy, each in a job that waits for one byte of the gate.
    std::atomic<std::size_t> blocked{0};
    for (std::size_t i = 0; i < BlockingWorker::kMaxThreads; ++i)
        worker.submit([&blocked, fd = gate_read.get()] {
            ++blocked;
            char c;
            [[maybe_unused]] const auto n = ::read(fd, &c, 1);
        });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (blocked < BlockingWorker::kMaxThreads && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    ASSERT_EQ(blocked, BlockingWorker::kMaxThreads);

    std::mutex mutex;
    std::vector<std::string> order;
    auto record = [&](std::string name) {
        return [&, name] {
            std::lock_guard lock(mutex);
            order.push_back(name);
        };
    };
    bool all_done = false;
    auto last = std::make_shared<Completion>([&] { all_done = true; });
    worker.submit(record("cleanup 1"));
    worker.submit(record("cleanup 2"));
    worker.submit(record("request 1"), {}, BlockingWorker::Lane::Request);
    worker.submit(record("cleanup 3"), last);
    worker.submit(record("request 2"), {}, BlockingWorker::Lane::Request);
    // One thread free: it takes the queue in its order, one job after another.
    ASSERT_EQ(::write(gate_write.get(), "x", 1), 1);
    ASSERT_TRUE(run_until([&] { return all_done; }));
    EXPECT_EQ(order, (std::vector<std::string>{"request 1", "request 2", "cleanup 1", "cleanup 2", "cleanup 3"}));
    const std::string rest(BlockingWorker::kMaxThreads - 1, 'x');
    ASSERT_EQ(::write(gate_write.get(), rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
}

TEST_F(BlockingWorkerTest, DisposedDescriptorsAreClosedBeforeTheCompletion) {
    BlockingWorker worker(event_, {::getuid(), ::getgid(), {}});
    ASSERT_EQ(worker.init(), 0);
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    UniqueFd read_end(p[0]);
    std::vector<UniqueFd> fds;
    fds.emplace_back(p[1]);
    bool done = false;
    auto completion = std::make_shared<Completion>([&] { done = true; });
    worker.dispose(std::move(fds), completion);
    ASSERT_TRUE(run_until([&] { return done; }));
    char c;
    EXPECT_EQ(::read(read_end.get(), &c, 1), 0) << "the write end is still open";
}

TEST_F(BlockingWorkerTest, ACompletionWhoseOwnerLetGoDoesNotRun) {
    BlockingWorker worker(event_, {::getuid(), ::getgid(), {}});
    ASSERT_EQ(worker.init(), 0);
    bool ran = false;
    auto dropped = std::make_shared<Completion>([&] { ran = true; });
    bool later = false;
    auto kept = std::make_shared<Completion>([&] { later = true; });
    worker.submit([] {}, dropped);
    dropped.reset();
    worker.submit([] {}, kept);
    ASSERT_TRUE(run_until([&] { return later; }));
    EXPECT_FALSE(ran);
}

// Issue 11, finding 9: a job judges paths as the agent would, not as root.
TEST_F(BlockingWorkerTest, JobsSeeTheFileSystemAsTheAgent) {
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED, NOT TESTED: taking another identity needs root";
    char tmpl[] = "/tmp/ptyvisor-worker-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);  // 0700, root's
    const std::string secret = std::string(tmpl) + "/tool";
    UniqueFd(::open(secret.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755));
    BlockingWorker worker(event_, {65534, 65534, {65534}});
    ASSERT_EQ(worker.init(), 0);
    std::atomic<int> error{-1};
    bool done = false;
    auto completion = std::make_shared<Completion>([&] { done = true; });
    worker.submit([&] {
        struct stat st{};
        error = ::stat(secret.c_str(), &st) == 0 ? 0 : errno;
    }, completion);
    ASSERT_TRUE(run_until([&] { return done; }));
    EXPECT_EQ(error, EACCES) << "the worker saw into a directory only root may search";
    struct stat st{};
    EXPECT_EQ(::stat(secret.c_str(), &st), 0) << "the test's own thread must still be root";
    ::unlink(secret.c_str());
    ::rmdir(tmpl);
}

}  // namespace
}  // namespace ptyvisor::server
