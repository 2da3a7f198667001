// Scenario 6, exit fidelity.
//
// Every exit code 0..255 comes back exactly (EXIT status "exited", that code, reason
// "exited"), eight sessions at a time. Every signal whose default action terminates the
// process (1..31 except CHLD, CONT, STOP, TSTP, TTIN, TTOU, URG and WINCH, plus real-time
// signals) is reported as status "signaled" with that signal, and with the core flag exactly
// as waitid() reports it for the same command run by the test itself as the same account in
// the same directory with the same RLIMIT_CORE: once with `ulimit -c 0` (no core) and once
// with `ulimit -c unlimited` (SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV,
// SIGXCPU, SIGXFSZ and SIGSYS then dump core when /proc/sys/kernel/core_pattern allows).
// Agreeing with waitid() would also pass if no core were ever dumped, so where the machine
// lets a core be written (a core_pattern that is not empty, RLIMIT_CORE not capped to 0 in
// the session) every one of those ten must have dumped, by waitid() and by the EXIT's flag;
// with a core_pattern that names a file in the working directory, the core file must be
// there exactly when the flag says so. Where the machine cannot dump, the test says so with
// GTEST_SKIP instead of passing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "rel_support.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

class ExitFidelity : public EndToEnd {
protected:
    DaemonConfig permissive() {
        DaemonConfig c = config();
        c.admissions_per_minute = 1000000;
        return c;
    }
    void remove_cores() {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(work_, ec))
            if (e.path().filename().string().rfind("core", 0) == 0) std::filesystem::remove(e.path(), ec);
    }
    std::size_t count_cores() const {
        std::size_t n = 0;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(work_, ec))
            if (e.path().filename().string().rfind("core", 0) == 0) ++n;
        return n;
    }
};

TEST_F(ExitFidelity, EveryExitCodeIsReportedExactly) {
    ASSERT_NE(start_daemon(permissive()), nullptr);
    UniqueFd cwd = open_work_dir();
    ASSERT_TRUE(cwd);
    std::string error;
    auto peers = rel::PeerPool::start(*account_, 2, error);  // 4 handshakes per process at most
    ASSERT_NE(peers, nullptr) << error;
    const auto t0 = Clock::now();
    std::size_t exact = 0;
    std::vector<int> wrong;
    for (int base = 0; base < 256; base += 8) {
        std::vector<std::unique_ptr<RawClient>> batch;
        for (int code = base; code < base + 8; ++code) {
            auto c = peers->connect(static_cast<std::size_t>(code), socket_);
            ASSERT_NE(c, nullptr);
            ASSERT_EQ(c->send_start(RawClient::start_request({"sh", "-c", "exit " + std::to_string(code)},
                                                             session_env(), cwd.get()),
                                    {cwd.get()}),
                      0);
            batch.push_back(std::move(c));
        }
        for (int k = 0; k < 8; ++k) {
            const int code = base + k;
            std::string seen;
            if (!batch[k]->expect_started(Millis(20000), &seen)) {
                ADD_FAILURE() << "code " << code << ": no STARTED: " << seen;
                wrong.push_back(code);
                continue;
            }
            const auto exit = batch[k]->read_until_exit(Millis(20000), &seen);
            if (!exit) {
                ADD_FAILURE() << "code " << code << ": no EXIT: " << seen;
                wrong.push_back(code);
                continue;
            }
            EXPECT_EQ(exit->kind, protocol::ExitStatus::Kind::Exited) << "code " << code;
            EXPECT_EQ(exit->code, code);
            EXPECT_EQ(exit->reason, protocol::ExitReason::Exited) << "code " << code;
            EXPECT_EQ(exit->shell_status(), code);
            if (backend() == "direct") {
                EXPECT_EQ(exit->unit_result, "") << "code " << code;
            }
            if (exit->kind == protocol::ExitStatus::Kind::Exited && exit->code == code)
                ++exact;
            else
                wrong.push_back(code);
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "[exit fidelity] exit codes 0..255 (" << backend() << "): " << exact << "/256 exact in " << seconds << " s";
    if (!wrong.empty()) {
        std::cout << "; wrong:";
        for (const int c : wrong) std::cout << " " << c;
    }
    std::cout << "\n";
}

TEST_F(ExitFidelity, EveryTerminatingSignalAndCoreFlagIsReportedAsWaitidSeesIt) {
    ASSERT_NE(start_daemon(permissive()), nullptr);
    std::string pattern = read_text_file("/proc/sys/kernel/core_pattern");
    while (!pattern.empty() && (pattern.back() == '\n' || pattern.back() == ' ')) pattern.pop_back();
    // core_pattern "core" or "core.%p" (no directory, no pipe): the kernel writes the core
    // file into the dumping process's working directory, here work_, where it can be counted.
    const bool core_files_in_cwd = pattern.rfind("core", 0) == 0 && pattern.find('/') == std::string::npos;
    // The signals whose default action is to dump core (signal(7)).
    const std::set<int> dumping = {SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS};
    const std::set<int> not_terminating = {SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH};
    std::vector<int> signals;
    for (int s = 1; s <= 31; ++s)
        if (!not_terminating.count(s)) signals.push_back(s);
    for (const int s : {34, 40, 50, 64}) signals.push_back(s);  // real-time signals terminate too

    std::size_t exact = 0, cores = 0, total = 0;
    std::size_t flagged = 0;        // EXITs with core_dumped set
    std::size_t could_dump = 0;     // dumping signals sent with a non-zero RLIMIT_CORE in the session
    std::size_t core_files = 0;     // core files the sessions left in work_
    std::string why_no_dump;        // the session's RLIMIT_CORE when "unlimited" was refused
    const auto t0 = Clock::now();
    for (const char* limit : {"0", "unlimited"}) {
        for (const int sig : signals) {
            remove_cores();
            auto c = connect_as_account();
            ASSERT_NE(c, nullptr);
            // The session reports the RLIMIT_CORE it really got (a unit may cap the hard
            // limit), so that the local run below uses the same.
            const std::string cmd = std::string("ulimit -c ") + limit + " 2>/dev/null; echo core=$(ulimit -c | sed s/unlimited/-1/); kill -" +
                                    std::to_string(sig) + " $$";
            ASSERT_TRUE(start_session(*c, {"sh", "-c", cmd}));
            std::string seen;
            const auto exit = c->read_until_exit(Millis(30000), &seen);
            ASSERT_TRUE(exit) << "signal " << sig << ": " << seen;
            const auto got_limit = number_after(c->output(), "core=");
            ASSERT_TRUE(got_limit) << c->output();
            const std::string effective = *got_limit < 0 ? "unlimited" : std::to_string(*got_limit);
            const std::size_t files = count_cores();
            if (core_files_in_cwd) {
                EXPECT_EQ(files > 0, exit->core_dumped)
                    << "signal " << sig << " with ulimit -c " << effective << ": " << files
                    << " core file(s) in the working directory, EXIT core_dumped " << exit->core_dumped;
            }
            core_files += files;
            if (std::string(limit) == "unlimited" && *got_limit == 0)
                why_no_dump = "the session's RLIMIT_CORE stayed 0 after ulimit -c unlimited";
            if (dumping.count(sig) && *got_limit != 0) ++could_dump;
            if (exit->core_dumped) ++flagged;
            remove_cores();
            const auto truth = rel::run_locally_as(*account_, work_,
                                                   {"/bin/sh", "-c", "ulimit -c " + effective + "; kill -" + std::to_string(sig) + " $$"},
                                                   Millis(30000));
            remove_cores();
            ASSERT_TRUE(truth) << "signal " << sig << ": the local run did not end";
            ASSERT_NE(truth->how, CLD_EXITED) << "signal " << sig << " did not terminate sh locally (" << truth->describe() << ")";
            ++total;
            EXPECT_EQ(exit->kind, protocol::ExitStatus::Kind::Signaled) << "signal " << sig;
            EXPECT_EQ(exit->signal, sig);
            EXPECT_EQ(exit->core_dumped, truth->how == CLD_DUMPED)
                << "signal " << sig << " with ulimit -c " << effective << ": waitid says "
                << (truth->how == CLD_DUMPED ? "dumped" : "no core") << ", core_pattern '" << pattern << "'";
            EXPECT_EQ(exit->reason, protocol::ExitReason::Exited);
            EXPECT_EQ(exit->shell_status(), 128 + sig);
            if (backend() == "direct") {
                EXPECT_EQ(exit->unit_result, "");
            }
            if (exit->kind == protocol::ExitStatus::Kind::Signaled && exit->signal == sig &&
                exit->core_dumped == (truth->how == CLD_DUMPED))
                ++exact;
            if (truth->how == CLD_DUMPED) ++cores;
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "[exit fidelity] " << signals.size() << " terminating signals x 2 core limits: " << exact << "/" << total
              << " exact (" << cores << " dumped core per waitid, " << flagged << " EXITs with core_dumped, "
              << core_files << " core files seen; core_pattern '" << pattern << "') in " << seconds << " s\n";
    // Where a core can be written, every dumping signal under a non-zero limit must have
    // written one: otherwise the comparison above only ever checked "no core" against "no core".
    // "Possible" is decided by the kernel itself: the test's own local run of a dumping
    // signal (waitid CLD_DUMPED), not by guessing from the settings.
    if (could_dump == 0 || cores == 0)
        GTEST_SKIP() << "no core dump happened here, not even in the test's own run (core_pattern '" << pattern
                     << "'" << (why_no_dump.empty() ? "" : "; " + why_no_dump)
                     << "): the core flag was checked only as false";
    EXPECT_EQ(cores, could_dump) << "waitid: dumping signals that dumped core, of those sent with a non-zero limit";
    EXPECT_EQ(flagged, could_dump) << "EXITs with core_dumped, of the dumping signals sent with a non-zero limit";
    if (core_files_in_cwd) {
        EXPECT_EQ(core_files, could_dump) << "core files written, of the dumping signals sent with a non-zero limit";
    }
}

}  // namespace
}  // namespace ptyvisor::itest
