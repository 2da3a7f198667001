// Micro-benchmarks of the protocol's hot path: encode_frame (every OUTPUT the daemon would
// build by copy, every INPUT the client sends) and FrameDecoder (every byte the daemon and
// the client receive). Sizes: a keystroke (1 B), a typical PTY read (4 KiB) and the maximal
// I/O payload (64 KiB). Bytes/s is payload throughput.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/frame.h"
#include "protocol/frame_decoder.h"

namespace {

using ptyvisor::protocol::encode_frame;
using ptyvisor::protocol::Frame;
using ptyvisor::protocol::FrameDecoder;
using ptyvisor::protocol::FrameType;

void BM_EncodeFrame(benchmark::State& state) {
    const std::vector<std::uint8_t> payload(static_cast<std::size_t>(state.range(0)), 'x');
    for (auto _ : state) {
        auto frame = encode_frame(FrameType::Output, std::span<const std::uint8_t>(payload));
        benchmark::DoNotOptimize(frame.data());
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_EncodeFrame)->Arg(1)->Arg(4096)->Arg(65536);

// A stream of whole frames fed in reads of `chunk` bytes, as a socket delivers them.
void decode_stream(benchmark::State& state, std::size_t payload_size, std::size_t chunk) {
    std::vector<std::uint8_t> stream;
    const std::size_t frames = std::max<std::size_t>(1, (1u << 20) / (payload_size + 8));
    const std::vector<std::uint8_t> payload(payload_size, 'y');
    for (std::size_t i = 0; i < frames; ++i) {
        const auto f = encode_frame(FrameType::Output, std::span<const std::uint8_t>(payload));
        stream.insert(stream.end(), f.begin(), f.end());
    }
    Frame frame;
    for (auto _ : state) {
        FrameDecoder decoder;
        std::size_t got = 0;
        for (std::size_t at = 0; at < stream.size(); at += chunk) {
            const auto n = std::min(chunk, stream.size() - at);
            decoder.feed(std::span<const std::uint8_t>(stream.data() + at, n));
            while (decoder.next(frame) == FrameDecoder::Status::Ready) ++got;
        }
        if (got != frames) state.SkipWithError("decoder lost frames");
        benchmark::DoNotOptimize(frame.payload.data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(frames * payload_size));
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(frames));
}

// Payload size, then read size (8 + 64 KiB is one full read of the daemon and the client).
void BM_Decode(benchmark::State& state) {
    decode_stream(state, static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
}
BENCHMARK(BM_Decode)
    ->Args({1, 65544})
    ->Args({4096, 65544})
    ->Args({65536, 65544})
    ->Args({4096, 1000})
    ->Args({65536, 4096});

}  // namespace

BENCHMARK_MAIN();
