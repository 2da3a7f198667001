// The screen's costs (docs/security.md, "The screen"; the README's figures):
//   - a SNAPSHOT of 200x50 with 1000 lines of scrollback: the worker's snapshot and JSON
//     encoding plus the daemon's check of it (decode_screen), median and worst of N;
//   - memory per session at that size, full screen and full scrollback (mallinfo2 before
//     and after making N emulators);
//   - the emulator's throughput on a mixed input;
//   - what finding the shell's marks (mark_scanner.h) adds to the worker's work: 64 MiB of
//     coloured text in the worker's 64 KiB chunks, through the emulator alone and through the
//     emulator and the scanner, best of three rounds each, alternated, in CPU time.
//   screenbench [ITERATIONS]
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "protocol/screen_payloads.h"
#include "screen/emulator.h"
#include "screen/mark_scanner.h"

namespace {

using Clock = std::chrono::steady_clock;
using ptyvisor::screen::Emulator;

void feed(Emulator& e, const std::string& s) {
    e.feed(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

// 2000 rows of 200 columns: coloured words, some wide characters.
std::string busy_output() {
    std::string out;
    for (int row = 0; row < 2000; ++row) {
        std::string line;
        for (int col = 0; line.size() < 190; ++col)
            line += (col % 7 == 0 ? "\x1b[1;3" + std::to_string(col % 8) + "mword\x1b[0m " : std::string("text "));
        if (row % 10 == 0) line += "\xe4\xb8\xad\xe6\x96\x87";
        out += line + "\r\n";
    }
    return out;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// This thread's CPU time in milliseconds: on a loaded machine, the clock's time is mostly others'.
double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Milliseconds to put `output` through a fresh emulator, and the scanner when `scan`, in
// chunks of the worker's size.
double worker_pass(const std::string& output, bool scan) {
    constexpr std::size_t kChunk = 64 * 1024;
    Emulator e(200, 50, 1000);
    ptyvisor::screen::MarkScanner scanner;
    std::vector<ptyvisor::server::ShellMark> found;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(output.data());
    const double start = cpu_ms();
    for (std::size_t at = 0; at < output.size(); at += kChunk) {
        const std::span chunk(bytes + at, std::min(kChunk, output.size() - at));
        e.feed(chunk);
        if (scan) scanner.scan(chunk, at, found);
        found.clear();  // the worker moves them to its bounded queue
    }
    return cpu_ms() - start;
}

void mark_scanning_cost(const std::string& busy) {
    constexpr std::size_t kSize = 64 << 20;
    std::string plain, marked;
    while (plain.size() < kSize) plain += busy;
    // A shell's prompt cycle every 4 KiB or so of it.
    const std::string cycle = "\x1b]133;D;0\x07\x1b]7;file://host/home/me\x07\x1b]133;A\x07$ \x1b]133;B\x07make\r\n"
                              "\x1b]133;C;cmdline_url=make%20-j2\x07";
    for (std::size_t at = 0; at < plain.size(); at += 4096) marked += cycle + plain.substr(at, 4096);
    for (const auto* input : {&plain, &marked}) {
        double alone = 1e300, scanned = 1e300;
        for (int round = 0; round < 3; ++round) {
            alone = std::min(alone, worker_pass(*input, false));
            scanned = std::min(scanned, worker_pass(*input, true));
        }
        std::printf("%s: %.1f MiB: emulator %.0f ms (%.1f MB/s), emulator and mark scanner %.0f ms (%.1f MB/s): +%.1f%%\n",
                    input == &plain ? "coloured text, no marks" : "coloured text, 6 marks per 4 KiB",
                    static_cast<double>(input->size()) / (1 << 20), alone, static_cast<double>(input->size()) / alone / 1000.0,
                    scanned, static_cast<double>(input->size()) / scanned / 1000.0, (scanned / alone - 1.0) * 100.0);
    }
    // The scanner alone, for scale.
    for (const auto* input : {&plain, &marked}) {
        ptyvisor::screen::MarkScanner scanner;
        std::vector<ptyvisor::server::ShellMark> found;
        std::size_t count = 0;
        const double start = cpu_ms();
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(input->data());
        for (std::size_t at = 0; at < input->size(); at += 64 * 1024) {
            scanner.scan(std::span(bytes + at, std::min<std::size_t>(64 * 1024, input->size() - at)), at, found);
            count += found.size();
            found.clear();
        }
        const double took = cpu_ms() - start;
        std::printf("  the mark scanner alone, %s: %.1f ms (%.0f MB/s), %zu marks\n", input == &plain ? "no marks" : "marks",
                    took, static_cast<double>(input->size()) / took / 1000.0, count);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::stoi(argv[1]) : 200;
    const std::string output = busy_output();

    Emulator e(200, 50, 1000);
    const auto t0 = Clock::now();
    feed(e, output);
    const double feed_ms = ms(Clock::now() - t0);
    std::printf("emulator throughput: %.1f MB/s (%zu bytes in %.1f ms)\n", static_cast<double>(output.size()) / feed_ms / 1000.0,
                output.size(), feed_ms);

    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    for (const bool attributes : {false, true}) {
        std::vector<double> times, emulator, encoding, checking;
        std::size_t bytes = 0;
        for (int i = 0; i < iterations; ++i) {
            const auto start = Clock::now();
            auto s = e.snapshot(1000, attributes);
            const auto taken = Clock::now();
            const std::string json = ptyvisor::protocol::encode(s);
            const auto encoded = Clock::now();
            const auto checked = ptyvisor::protocol::decode_screen(json, {200, 50, 1000, attributes});
            times.push_back(ms(Clock::now() - start));
            emulator.push_back(ms(taken - start));
            encoding.push_back(ms(encoded - taken));
            checking.push_back(ms(Clock::now() - encoded));
            bytes = json.size();
            if (!checked || checked.value->scrollback.size() != 1000) {
                std::fprintf(stderr, "screenbench: a snapshot failed its check\n");
                return 1;
            }
        }
        std::sort(times.begin(), times.end());
        std::printf("snapshot 200x50 + 1000 lines scrollback%s: median %.2f ms, max %.2f ms (%zu bytes of JSON, %d runs)\n",
                    attributes ? " + attributes" : "", times[times.size() / 2], times.back(), bytes, iterations);
        std::printf("  of which: emulator %.2f ms, JSON encoding %.2f ms, the daemon's check %.2f ms (medians)\n",
                    median(emulator), median(encoding), median(checking));
    }

    mark_scanning_cost(output);

    constexpr int kSessions = 20;
    const auto before = mallinfo2().uordblks;
    std::vector<std::unique_ptr<Emulator>> many;
    for (int i = 0; i < kSessions; ++i) {
        many.push_back(std::make_unique<Emulator>(200, 50, 1000));
        feed(*many.back(), output);
        feed(*many.back(), "\x1b[?1049h" + output.substr(0, 50 * 200));  // the alternate screen too
    }
    const auto after = mallinfo2().uordblks;
    std::printf("memory per session (200x50, 1000 lines of 200-column scrollback, both screens): %.0f KiB\n",
                static_cast<double>(after - before) / kSessions / 1024.0);
    return 0;
}
