// Scenario 5, no loss and no hang.
//
//   FastExitSessionsDeliverEveryByte   many sessions that print and exit at once (systemd-run's
//                                      old bug #7531 lost ~19% of `echo` runs): every byte,
//                                      then EXIT, for each.
//   BulkThroughARawTerminalIsIntact    one session in raw mode (stty raw -echo) writes N random
//                                      bytes and then their SHA-256: the client receives
//                                      exactly N bytes whose digest matches.
//   StalledClientEndsWithClientStalled a client that stops reading: the session ends after the
//                                      operation timeout (1 s here) with reason client_stalled
//                                      (or the connection closes), the command is gone, and the
//                                      daemon's memory stays bounded meanwhile.
//   BackgroundHolderEndsAtDrainTimeout `sh -c "trap '' HUP; sleep 100 & echo done"` with
//                                      drain = 0.5 s: EXIT reason drain_timeout, code 0, and the
//                                      sleep is gone. (Without the trap the kernel ends the sleep
//                                      itself: when the session leader exits, the foreground
//                                      process group, which a non-interactive sh's background
//                                      job belongs to, gets SIGHUP, so nothing holds the
//                                      terminal and the session ends "exited" at once. Both
//                                      variants are checked.)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include "common/linux.h"
#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

class NoLoss : public EndToEnd {};

TEST_F(NoLoss, FastExitSessionsDeliverEveryByte) {
    DaemonConfig cfg = config();
    cfg.admissions_per_minute = 1000000;
    cfg.max_sessions = 16;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const std::size_t runs = scaled(500, 10000);
    // Sessions run 8 at a time (within max_sessions), each printing a distinct line and
    // exiting at once.
    const std::size_t parallel = 8;
    std::string error;
    auto peers = rel::PeerPool::start(*account_, 2, error);  // 4 handshakes per process at most
    ASSERT_NE(peers, nullptr) << error;
    std::map<std::string, long> problems;
    std::string first;
    UniqueFd cwd = open_work_dir();
    ASSERT_TRUE(cwd);
    const std::string filler(100, 'y');
    const auto t0 = Clock::now();
    for (std::size_t base = 0; base < runs; base += parallel) {
        std::vector<std::unique_ptr<RawClient>> batch;
        std::vector<std::string> expect;
        for (std::size_t k = 0; k < parallel && base + k < runs; ++k) {
            const std::string text = "run-" + std::to_string(base + k) + "-" + filler + "-end";
            auto c = peers->connect(k, socket_);
            ASSERT_NE(c, nullptr);
            ASSERT_EQ(c->send_start(RawClient::start_request({"echo", text}, session_env(), cwd.get()), {cwd.get()}), 0);
            batch.push_back(std::move(c));
            expect.push_back(text + "\r\n");
        }
        for (std::size_t k = 0; k < batch.size(); ++k) {
            std::string seen;
            std::string problem;
            if (!batch[k]->expect_started(Millis(20000), &seen)) {
                problem = "no STARTED: " + seen.substr(0, 80);
            } else if (const auto exit = batch[k]->read_until_exit(Millis(20000), &seen); !exit) {
                problem = "no EXIT: " + seen.substr(0, 80);
            } else if (exit->shell_status() != 0 || exit->reason != protocol::ExitReason::Exited) {
                problem = "EXIT " + std::string(protocol::to_string(exit->reason));
            } else if (batch[k]->output() != expect[k]) {
                problem = batch[k]->output().empty() ? "no output" : "output differs";
            } else if (!batch[k]->expect_eof(Millis(10000), &seen)) {
                problem = "after EXIT: " + seen.substr(0, 80);
            }
            if (!problem.empty()) {
                ++problems[problem.substr(0, problem.find(':'))];
                if (first.empty())
                    first = "run " + std::to_string(base + k) + ": " + problem + "; output '" + batch[k]->output() + "'";
            }
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "[no loss] " << runs << " fast-exit sessions, " << parallel << " at a time, in " << seconds
              << " s: " << (runs - [&] { long n = 0; for (auto& [k, v] : problems) n += v; return static_cast<std::size_t>(n); }())
              << " complete\n";
    RecordProperty("runs", static_cast<int>(runs));
    for (const auto& [what, n] : problems) ADD_FAILURE() << n << " of " << runs << " runs: " << what;
    EXPECT_TRUE(problems.empty()) << "first: " << first;
}

TEST_F(NoLoss, BulkThroughARawTerminalIsIntact) {
    DaemonProcess* d = start_daemon();
    ASSERT_NE(d, nullptr);
    const std::size_t volume = scaled(std::size_t{64} << 20, std::size_t{1} << 30);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    // Raw mode: no output processing (no \n -> \r\n), no echo. The command writes the data,
    // and sha256sum (fed by tee) writes the digest after the last data byte.
    const std::string script = "stty raw -echo && exec 3>&1 && head -c " + std::to_string(volume) +
                               " /dev/urandom | tee /dev/fd/3 | sha256sum";
    ASSERT_TRUE(start_session(*c, {"sh", "-c", script}));
    rel::Sha256 sha;
    std::size_t received = 0;
    std::string trailer;
    std::optional<protocol::ExitStatus> exit;
    std::string problem;
    long peak_kib = d->rss_kib();
    const long base_kib = peak_kib;
    const auto t0 = Clock::now();
    while (!exit) {
        const Incoming in = c->next(Millis(60000));
        if (in.kind != Incoming::Kind::Frame) {
            problem = "after " + std::to_string(received) + " bytes: " + in.describe();
            break;
        }
        if (in.frame.type == FrameType::Exit) {
            exit = protocol::decode_exit(in.frame.text()).value;
            break;
        }
        if (in.frame.type != FrameType::Output) {
            problem = "unexpected " + in.describe();
            break;
        }
        const auto& p = in.frame.payload;
        const std::size_t take = std::min(p.size(), volume - received);
        sha.update(p.data(), take);
        received += take;
        trailer.append(reinterpret_cast<const char*>(p.data()) + take, p.size() - take);
        if ((received & ((std::size_t{16} << 20) - 1)) < p.size()) peak_kib = std::max(peak_kib, d->rss_kib());
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string ours = sha.hex_digest();
    std::cout << "[no loss] " << received << " bytes through a raw terminal in " << seconds << " s ("
              << (static_cast<double>(received) / (1 << 20) / seconds) << " MiB/s); daemon RSS " << base_kib
              << " -> peak " << peak_kib << " KiB\n";
    ASSERT_TRUE(exit) << problem;
    EXPECT_EQ(exit->shell_status(), 0);
    EXPECT_EQ(protocol::to_string(exit->reason), "exited");
    EXPECT_EQ(received, volume);
    EXPECT_EQ(trailer.substr(0, 64), ours) << "the digest the session computed differs from the bytes received; trailer: '"
                                           << trailer.substr(0, 100) << "'";
}

TEST_F(NoLoss, StalledClientEndsWithClientStalled) {
    DaemonConfig cfg = config();
    cfg.operation = 1;
    DaemonProcess* d = start_daemon(cfg);
    ASSERT_NE(d, nullptr);
    const long base_kib = d->rss_kib();
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"sh", "-c", "echo pid=$$; exec yes stalled-client-output"}));
    const auto pid = read_number(*c, "pid=");
    ASSERT_TRUE(pid);
    UniqueFd pidfd = open_pidfd(*pid);
    ASSERT_TRUE(pidfd);
    // The client reads nothing more. The command must be stopped once the daemon has been
    // unable to write for the operation timeout; the pidfd says when.
    const auto t0 = Clock::now();
    long peak_kib = base_kib;
    bool gone = false;
    while (!gone && Clock::now() - t0 < Millis(20000)) {
        gone = wait_pidfd_exit(pidfd.get(), Millis(100));  // samples RSS while it waits
        peak_kib = std::max(peak_kib, d->rss_kib());
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(gone) << "the command of a stalled client still runs after 20 s";
    // Now read: whatever OUTPUT was in flight, then EXIT client_stalled, or just the close.
    std::string ending;
    for (;;) {
        const Incoming in = c->next(Millis(20000));
        if (in.kind == Incoming::Kind::Eof) {
            if (ending.empty()) ending = "closed without EXIT";
            break;
        }
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
        if (in.frame.type == FrameType::Output) continue;
        ASSERT_EQ(in.frame.type, FrameType::Exit) << in.describe();
        const auto exit = protocol::decode_exit(in.frame.text());
        ASSERT_TRUE(exit);
        ending = "EXIT " + std::string(protocol::to_string(exit.value->reason));
        EXPECT_EQ(exit.value->reason, protocol::ExitReason::ClientStalled);
    }
    std::cout << "[no loss] stalled client: session ended " << seconds << " s after the client stopped reading ("
              << ending << "); daemon RSS " << base_kib << " -> peak " << peak_kib << " KiB\n";
    EXPECT_GE(seconds, 0.9) << "ended before the operation timeout";
    EXPECT_LT(peak_kib - base_kib, 16 * 1024) << "daemon memory grew while the client stalled";
    EXPECT_TRUE(d->running());
}

TEST_F(NoLoss, BackgroundJobWithoutHupImmunityDiesWithTheLeaderAndNeedsNoDrain) {
    DaemonConfig cfg = config();
    cfg.drain = 0.5;
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"sh", "-c", "sleep 100 & echo bg=$!; echo done"}));
    const auto bg = read_number(*c, "bg=");
    ASSERT_TRUE(bg);
    // The job may already be gone (the hang-up that kills it can come before we look): then
    // there is nothing to pin, and that is the outcome asserted below.
    UniqueFd bgfd = open_pidfd(*bg);
    const bool gone_already = !bgfd && errno == ESRCH;
    ASSERT_TRUE(bgfd || gone_already) << "pidfd_open(" << *bg << "): " << std::strerror(errno);
    std::string seen;
    const auto exit = c->read_until_exit(Millis(20000), &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->reason, protocol::ExitReason::Exited) << protocol::to_string(exit->reason);
    EXPECT_EQ(exit->shell_status(), 0);
    EXPECT_NE(c->output().find("done"), std::string::npos) << c->output();
    if (bgfd) {
        EXPECT_TRUE(wait_pidfd_exit(bgfd.get(), Millis(20000))) << "the background sleep " << *bg << " survived";
    }
}

TEST_F(NoLoss, BackgroundHolderEndsAtDrainTimeout) {
    DaemonConfig cfg = config();
    cfg.drain = 0.5;
    ASSERT_NE(start_daemon(cfg), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"sh", "-c", "trap '' HUP; sleep 100 & echo bg=$!; echo done"}));
    const auto bg = read_number(*c, "bg=");
    ASSERT_TRUE(bg);
    UniqueFd bgfd = open_pidfd(*bg);
    ASSERT_TRUE(bgfd);
    const auto t0 = Clock::now();
    std::string seen;
    const auto exit = c->read_until_exit(Millis(20000), &seen);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->reason, protocol::ExitReason::DrainTimeout) << protocol::to_string(exit->reason);
    EXPECT_EQ(exit->kind, protocol::ExitStatus::Kind::Exited);
    EXPECT_EQ(exit->code, 0);
    EXPECT_NE(c->output().find("done"), std::string::npos) << c->output();
    EXPECT_TRUE(wait_pidfd_exit(bgfd.get(), Millis(20000))) << "the background sleep " << *bg << " survived";
    std::cout << "[no loss] background holder: EXIT " << protocol::to_string(exit->reason) << " after " << seconds
              << " s\n";
    EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace ptyvisor::itest
