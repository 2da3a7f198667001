// screen_rebuild: what the screen worker's eviction of idle emulators costs and saves
// (src/screen/worker.h; docs/performance.md, "Idle sessions").
//   - the worker's heap per session (mallinfo2, after malloc_trim as the worker does), for N
//     80x24 sessions that never printed, N that printed a screenful (resident), and the same
//     N after their quiet period (evicted);
//   - the CPU time of the first message after a quiet period, which rebuilds the screen by
//     replaying the log: a SNAPSHOT of a session whose log holds L bytes (at most half the log
//     can be replayed; a session past that keeps its emulator), median and worst of R.
//   screen_rebuild [SESSIONS [ROUNDS]]
#include <fcntl.h>
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "screen/worker.h"
#include "server/output_log.h"

namespace {

using ptyvisor::UniqueFd;
using ptyvisor::screen::MessageType;
using ptyvisor::screen::Worker;
using ptyvisor::screen::Writer;
using ptyvisor::server::OutputLog;

constexpr std::size_t kLogCapacity = 2 << 20;  // output_log_bytes, the default

double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double heap_kib() {
    ::malloc_trim(0);
    const struct mallinfo2 m = ::mallinfo2();
    return static_cast<double>(m.uordblks + m.hblkhd) / 1024.0;
}

// A shell's output: coloured lines of 70 columns, a prompt with a title every 20 lines.
std::string shell_output(std::size_t bytes) {
    std::string out;
    for (int row = 0; out.size() < bytes; ++row) {
        if (row % 20 == 0) out += "\x1b]0;user@host: ~/src\x07\x1b[1;32muser@host\x1b[0m:\x1b[1;34m~/src\x1b[0m$ make\r\n";
        out += "\x1b[33mCC\x1b[0m src/file" + std::to_string(row) + ".o " + std::string(50, 'x') + "\r\n";
    }
    out.resize(bytes);
    return out;
}

struct Fixture {
    std::vector<std::unique_ptr<OutputLog>> logs;
    Worker worker{[](std::vector<std::uint8_t>) {}};

    bool send(std::vector<std::uint8_t> m, std::vector<UniqueFd> fds = {}) {
        bool ok = true;
        ptyvisor::screen::split_messages(m, ptyvisor::screen::kMaxDaemonMessage,
                                         [&](MessageType t, std::span<const std::uint8_t> b) {
                                             ok = worker.handle(t, b, fds);
                                             return ok;
                                         });
        return ok;
    }
    bool open(std::uint32_t id, const std::string& output) {
        std::unique_ptr<OutputLog> log;
        if (OutputLog::create("screen-rebuild", kLogCapacity, log) != 0) return false;
        log->append(std::span(reinterpret_cast<const std::uint8_t*>(output.data()), output.size()));
        std::vector<UniqueFd> fds;
        fds.emplace_back(::open(("/proc/self/fd/" + std::to_string(log->fd())).c_str(), O_RDONLY | O_CLOEXEC));
        const bool ok = send(Writer(MessageType::Open).put(id).put(std::uint64_t{log->capacity()}).put(log->start())
                                 .put(log->end()).put(std::uint16_t{80}).put(std::uint16_t{24}).put(std::uint32_t{1000})
                                 .finish(),
                             std::move(fds));
        logs.push_back(std::move(log));
        return ok;
    }
    bool snapshot(std::uint32_t id) {
        return send(Writer(MessageType::Snapshot).put(std::uint32_t{1}).put(id).put(logs[id]->end())
                        .put(std::uint32_t{0}).put(std::uint8_t{0}).finish());
    }
};

Worker::Clock::time_point after_quiet() { return Worker::Clock::now() + Worker::kQuietPeriod * 2; }

}  // namespace

int main(int argc, char** argv) {
    const int sessions = argc > 1 ? std::stoi(argv[1]) : 300;
    const int rounds = argc > 2 ? std::stoi(argv[2]) : 20;

    {
        Fixture f;
        const double base = heap_kib();
        for (int i = 0; i < sessions; ++i)
            if (!f.open(static_cast<std::uint32_t>(i), "")) return 1;
        const double idle = heap_kib();
        const std::string screenful = shell_output(4096);
        Fixture g;
        const double base2 = heap_kib();
        for (int i = 0; i < sessions; ++i)
            if (!g.open(static_cast<std::uint32_t>(i), screenful)) return 1;
        const double shown = heap_kib();
        const std::size_t evicted = g.worker.evict_quiet(after_quiet());
        const double quiet = heap_kib();
        std::printf("worker heap per 80x24 session, %d sessions (KiB): never printed %.2f; printed %zu bytes: "
                    "resident %.2f, after the quiet period %.2f (%zu evicted)\n",
                    sessions, (idle - base) / sessions, screenful.size(), (shown - base2) / sessions,
                    (quiet - base2) / sessions, evicted);
    }
    for (const std::size_t bytes : {std::size_t{4096}, std::size_t{64} << 10, kLogCapacity / 2}) {
        Fixture f;
        if (!f.open(0, shell_output(bytes))) return 1;
        std::vector<double> times;
        for (int r = 0; r < rounds; ++r) {
            if (f.worker.evict_quiet(after_quiet()) != 1) {
                std::fprintf(stderr, "screen_rebuild: the session was not evicted\n");
                return 1;
            }
            const double start = cpu_ms();
            if (!f.snapshot(0)) return 1;
            times.push_back(cpu_ms() - start);
        }
        std::sort(times.begin(), times.end());
        std::printf("first SNAPSHOT after the quiet period, log of %zu bytes (80x24): CPU median %.2f ms, max %.2f ms "
                    "(%d rounds)\n",
                    bytes, times[times.size() / 2], times.back(), rounds);
    }
    return 0;
}
