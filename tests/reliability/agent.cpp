// reliability_agent: the allowed agent of the allow_units flood scenario. It runs as the
// MainPID of a transient unit (systemd-run --unit=rel-agent.service -p User=...), asks for
// `--count` sessions of `true` in its working directory, prints "lat <ms>" for each STARTED
// and one line per failure, and exits 0 only if every request got STARTED and EXIT 0.
//
// With --sibling-flood KIND and --sibling-requests N it first starts, as its own children
// and so inside its own unit, a flood of that kind and a process that asks for N sessions
// exactly as it does: the commands an agent runs, turned against the daemon. It reports
// what they got ("sibling flood ...", "sibling requests ...") and does not judge it.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rel_support.h"

using namespace ptyvisor;
using namespace ptyvisor::itest;

int main(int argc, char** argv) {
    std::string socket_path, sibling_flood;
    std::size_t count = 10, sibling_requests = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--socket") == 0) socket_path = argv[i + 1];
        else if (std::strcmp(argv[i], "--count") == 0) count = std::strtoul(argv[i + 1], nullptr, 10);
        else if (std::strcmp(argv[i], "--sibling-flood") == 0) sibling_flood = argv[i + 1];
        else if (std::strcmp(argv[i], "--sibling-requests") == 0)
            sibling_requests = std::strtoul(argv[i + 1], nullptr, 10);
    }
    if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
        std::cerr << "usage: reliability_agent --socket PATH [--count N]\n";
        return 2;
    }
    UniqueFd cwd(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cwd) {
        std::perror("open .");
        return 2;
    }
    const auto connect = [&] {
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
        if (fd && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
            fd.reset();
        return fd;
    };
    const std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"};

    std::vector<std::unique_ptr<rel::Flood>> floods;
    for (const rel::FloodKind kind : {rel::FloodKind::Hold, rel::FloodKind::Slowloris, rel::FloodKind::Garbage,
                                      rel::FloodKind::ConnectClose, rel::FloodKind::FailAuth}) {
        if (sibling_flood != "all" && sibling_flood != rel::to_string(kind)) continue;
        rel::FloodOptions o;
        o.kind = kind;
        o.socket = socket_path;
        o.work_dir = ".";
        o.processes = 4;
        o.connections = 32;
        o.slowloris_interval = Millis(1000);
        o.seed = 99 + static_cast<std::uint64_t>(kind);
        const Account self{"", ::getuid(), ::getgid(), ""};
        std::string error;
        auto f = rel::Flood::start(o, self, error);
        if (!f) {
            std::printf("sibling flood failed to start: %s\n", error.c_str());
            return 2;
        }
        floods.push_back(std::move(f));
    }
    // The sibling asks at once, to meet the daemon while it may not know our MainPID yet.
    int sibling_report[2] = {-1, -1};
    pid_t sibling = -1;
    if (sibling_requests > 0) {
        if (::pipe2(sibling_report, O_CLOEXEC) != 0) return 2;
        sibling = ::fork();
        if (sibling == 0) {
            const auto s = rel::run_agent(connect, cwd.get(), env, sibling_requests);
            std::string line = "sibling requests started " + std::to_string(s.ms.size());
            for (const auto& [what, n] : s.failures) line += ", " + std::to_string(n) + " x " + what;
            line += "\n";
            [[maybe_unused]] const auto n = ::write(sibling_report[1], line.data(), line.size());
            ::_exit(0);
        }
        ::close(sibling_report[1]);
    }

    const auto r = rel::run_agent(connect, cwd.get(), env, count);

    if (sibling > 0) {
        std::string line;
        char buf[512];
        for (ssize_t n; (n = ::read(sibling_report[0], buf, sizeof buf)) > 0;) line.append(buf, static_cast<std::size_t>(n));
        ::waitpid(sibling, nullptr, 0);
        std::printf("%s", line.empty() ? "sibling requests reported nothing\n" : line.c_str());
    }
    for (auto& f : floods) std::printf("sibling flood %s\n", f->stop().describe().c_str());
    for (const double ms : r.ms) std::printf("lat %.3f\n", ms);
    for (const auto& [what, n] : r.failures) std::printf("failure %ld x %s\n", n, what.c_str());
    for (const std::size_t i : r.failed_at) std::printf("failed request %zu\n", i);
    if (!r.first_failure.empty()) std::printf("first failure: %s\n", r.first_failure.c_str());
    const auto l = rel::summarize(r.ms);
    std::printf("summary %s\n", l.describe().c_str());
    return r.failures.empty() && r.ms.size() == count ? 0 : 1;
}
