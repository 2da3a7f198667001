#include "server/output_queue.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "common/unique_fd.h"
#include "protocol/frame_decoder.h"

namespace ptyvisor::server {
namespace {

struct Pair {
    UniqueFd a, b;
    Pair() {
        int fds[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
        a.reset(fds[0]);
        b.reset(fds[1]);
    }
};

std::vector<protocol::Frame> drain(int fd) {
    protocol::FrameDecoder d;
    std::vector<protocol::Frame> frames;
    std::uint8_t buf[65536];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
        d.feed(std::span(buf, static_cast<std::size_t>(n)));
        protocol::Frame f;
        while (d.next(f) == protocol::FrameDecoder::Status::Ready) frames.push_back(f);
    }
    return frames;
}

TEST(OutputQueue, OutputFramesKeepOrderWithControlFrames) {
    Pair p;
    OutputQueue q;
    auto space = q.prepare_output(16);
    std::memcpy(space.data(), "hello", 5);
    q.commit_output(5);
    q.push(protocol::FrameType::Exit, "{}");
    bool progress = false;
    ASSERT_EQ(q.flush(p.a.get(), progress), OutputQueue::Flush::Drained);
    EXPECT_TRUE(progress);
    const auto frames = drain(p.b.get());
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].type, protocol::FrameType::Output);
    EXPECT_EQ(frames[0].text(), "hello");
    EXPECT_EQ(frames[1].type, protocol::FrameType::Exit);
}

TEST(OutputQueue, EmptyCommitLeavesNothing) {
    OutputQueue q;
    q.prepare_output(1024);
    q.commit_output(0);
    EXPECT_TRUE(q.empty());
}

TEST(OutputQueue, BlocksWhenThePeerDoesNotReadAndResumesIntact) {
    Pair p;
    OutputQueue q;
    std::size_t total = 0;
    for (int i = 0; i < 64; ++i) {
        auto space = q.prepare_output(protocol::kMaxIoPayloadSize);
        std::memset(space.data(), 'a' + (i % 26), space.size());
        q.commit_output(space.size());
        total += space.size();
    }
    bool progress = false;
    ASSERT_EQ(q.flush(p.a.get(), progress), OutputQueue::Flush::Blocked);
    std::size_t received = 0;
    protocol::FrameDecoder d;
    std::uint8_t buf[65536];
    while (!q.empty()) {
        for (ssize_t n; (n = ::recv(p.b.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
            d.feed(std::span(buf, static_cast<std::size_t>(n)));
            protocol::Frame f;
            while (d.next(f) == protocol::FrameDecoder::Status::Ready) received += f.payload.size();
        }
        q.flush(p.a.get(), progress);
    }
    for (ssize_t n; (n = ::recv(p.b.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
        d.feed(std::span(buf, static_cast<std::size_t>(n)));
        protocol::Frame f;
        while (d.next(f) == protocol::FrameDecoder::Status::Ready) received += f.payload.size();
    }
    EXPECT_EQ(received, total);
}

TEST(OutputQueue, FailsWhenThePeerIsGone) {
    Pair p;
    OutputQueue q;
    q.push(protocol::FrameType::Exit, "{}");
    p.b.reset();
    bool progress = true;
    EXPECT_EQ(q.flush(p.a.get(), progress), OutputQueue::Flush::Failed);
    EXPECT_FALSE(progress);
}

}  // namespace
}  // namespace ptyvisor::server

namespace ptyvisor::server {
namespace {

// A client that stops reading mid-frame must still get a well-framed stream: the frame it
// has begun is finished, the rest dropped, and what is queued after (EXIT) decodes.
TEST(OutputQueue, DropUnsentKeepsTheStreamFramed) {
    Pair p;
    OutputQueue q;
    for (int i = 0; i < 64; ++i) {
        auto space = q.prepare_output(protocol::kMaxIoPayloadSize - 7);  // frames straddle buffers
        std::memset(space.data(), 'x', space.size());
        q.commit_output(space.size());
    }
    bool progress = false;
    ASSERT_EQ(q.flush(p.a.get(), progress), OutputQueue::Flush::Blocked);
    q.drop_unsent();
    q.push(protocol::FrameType::Exit, "{}");
    protocol::FrameDecoder d;
    std::vector<protocol::Frame> frames;
    std::uint8_t buf[65536];
    for (int rounds = 0; rounds < 1000 && (frames.empty() || frames.back().type != protocol::FrameType::Exit);
         ++rounds) {
        for (ssize_t n; (n = ::recv(p.b.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
            d.feed(std::span(buf, static_cast<std::size_t>(n)));
            protocol::Frame f;
            for (protocol::FrameDecoder::Status st; (st = d.next(f)) != protocol::FrameDecoder::Status::NeedMore;) {
                ASSERT_EQ(st, protocol::FrameDecoder::Status::Ready) << "stream lost framing";
                frames.push_back(f);
            }
        }
        q.flush(p.a.get(), progress);
    }
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames.back().type, protocol::FrameType::Exit);
    EXPECT_LT(frames.size(), 65u) << "unsent frames were not dropped";
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) EXPECT_EQ(frames[i].type, protocol::FrameType::Output);
}

TEST(OutputQueue, DropUnsentOnAFrameBoundaryDropsEverything) {
    OutputQueue q;
    q.push(protocol::FrameType::Exit, "{}");
    q.drop_unsent();
    EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace ptyvisor::server
