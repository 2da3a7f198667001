// reliability_agent: the allowed agent of the allow_units flood scenario. It runs as the
// MainPID of a transient unit (systemd-run --unit=rel-agent.service -p User=...), asks for
// `--count` sessions of `true` in its working directory, prints "lat <ms>" for each STARTED
// and one line per failure, and exits 0 only if every request got STARTED and EXIT 0.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "rel_support.h"

using namespace ptyvisor;
using namespace ptyvisor::itest;

int main(int argc, char** argv) {
    std::string socket_path;
    std::size_t count = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--socket") == 0) socket_path = argv[i + 1];
        else if (std::strcmp(argv[i], "--count") == 0) count = std::strtoul(argv[i + 1], nullptr, 10);
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
    const auto r = rel::run_agent(connect, cwd.get(), env, count);
    for (const double ms : r.ms) std::printf("lat %.3f\n", ms);
    for (const auto& [what, n] : r.failures) std::printf("failure %ld x %s\n", n, what.c_str());
    for (const std::size_t i : r.failed_at) std::printf("failed request %zu\n", i);
    if (!r.first_failure.empty()) std::printf("first failure: %s\n", r.first_failure.c_str());
    const auto l = rel::summarize(r.ms);
    std::printf("summary %s\n", l.describe().c_str());
    return r.failures.empty() && r.ms.size() == count ? 0 : 1;
}
