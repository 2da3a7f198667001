// Sessions: the fixture of the suites that speak protocol version 2's session requests at
// the wire (LIST, READ, WAIT, ATTACH): one request per connection, every frame of the reply.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {

inline constexpr Millis kReply{10000};

// The expected terminal bytes of `seq 1 N`: the terminal turns each \n into \r\n.
inline std::string seq_output(int n) {
    std::string out;
    for (int i = 1; i <= n; ++i) out += std::to_string(i) + "\r\n";
    return out;
}

class Sessions : public EndToEnd {
protected:
    // Sends one request and gathers every frame until the daemon closes.
    std::vector<protocol::Frame> exchange(RawClient& c, protocol::FrameType type, const std::string& payload,
                                          Millis timeout = kReply) {
        std::vector<protocol::Frame> frames;
        if (const int e = c.send_frame(type, payload); e != 0) {
            ADD_FAILURE() << "send: " << std::strerror(-e);
            return frames;
        }
        for (;;) {
            auto in = c.next(timeout);
            if (in.kind != Incoming::Kind::Frame) {
                if (in.kind != Incoming::Kind::Eof) ADD_FAILURE() << "waiting for the reply: " << in.describe();
                return frames;
            }
            frames.push_back(std::move(in.frame));
        }
    }
    std::vector<protocol::Frame> request(protocol::FrameType type, const std::string& payload, Millis timeout = kReply) {
        auto c = connect_as_account();
        if (!c) return {};
        return exchange(*c, type, payload, timeout);
    }

    // READ: the LOG reply and the bytes that followed it.
    struct ReadResult {
        protocol::LogReply log;
        std::string bytes;
    };
    std::optional<ReadResult> read_log(const std::string& id, protocol::LogPosition from = {},
                                       std::uint64_t max = protocol::kMaxReadBytes) {
        const auto frames = request(protocol::FrameType::Read, protocol::encode(protocol::ReadRequest{id, from, max}));
        if (frames.empty() || frames.front().type != protocol::FrameType::Log) {
            ADD_FAILURE() << "no LOG" << (frames.empty() ? "" : ": " + std::string(frames.front().text()));
            return std::nullopt;
        }
        auto log = protocol::decode_log(frames.front().text());
        if (!log) {
            ADD_FAILURE() << log.error;
            return std::nullopt;
        }
        ReadResult r{*log.value, {}};
        for (std::size_t i = 1; i < frames.size(); ++i) {
            EXPECT_EQ(frames[i].type, protocol::FrameType::Output);
            r.bytes.append(frames[i].text());
        }
        return r;
    }

    std::optional<protocol::WaitReply> wait(const protocol::WaitRequest& w) {
        const auto frames = request(protocol::FrameType::Wait, protocol::encode(w), Millis(w.timeout_ms + 10000));
        if (frames.size() != 1 || frames.front().type != protocol::FrameType::Waited) {
            ADD_FAILURE() << "no WAITED" << (frames.empty() ? "" : ": " + std::string(frames.front().text()));
            return std::nullopt;
        }
        auto r = protocol::decode_waited(frames.front().text());
        if (!r) ADD_FAILURE() << r.error;
        return r.value;
    }
    std::optional<protocol::WaitReply> wait_exit(const std::string& id, std::uint64_t timeout_ms = 10000) {
        protocol::WaitRequest w;
        w.id = id;
        w.timeout_ms = timeout_ms;
        return wait(w);
    }

    std::vector<protocol::SessionInfo> list() {
        const auto frames = request(protocol::FrameType::List, "");
        if (frames.size() != 1 || frames.front().type != protocol::FrameType::Sessions) {
            ADD_FAILURE() << "no SESSIONS";
            return {};
        }
        auto d = protocol::decode_sessions(frames.front().text());
        if (!d) ADD_FAILURE() << d.error;
        return d ? *d.value : std::vector<protocol::SessionInfo>{};
    }

    // An ERROR's code, when `frames` is exactly one ERROR.
    static std::string error_of(const std::vector<protocol::Frame>& frames) {
        if (frames.size() != 1 || frames.front().type != protocol::FrameType::Error) return "(not one ERROR)";
        const auto e = protocol::decode_error(frames.front().text());
        return e ? std::string(protocol::to_string(e.value->code)) : "(bad ERROR)";
    }

    std::unique_ptr<RawClient> attach(const std::string& id, bool observe, bool takeover = false,
                                      protocol::LogPosition from = {}, bool as_root = false) {
        auto c = as_root ? connect_as(0, 0, {0}) : connect_as_account();
        if (!c) return nullptr;
        protocol::AttachRequest a{id, from, observe, takeover};
        if (const int e = c->send_frame(protocol::FrameType::Attach, protocol::encode(a)); e != 0) {
            ADD_FAILURE() << std::strerror(-e);
            return nullptr;
        }
        return c;
    }
    static std::optional<protocol::AttachedReply> expect_attached(RawClient& c) {
        auto in = c.next(kReply);
        if (in.kind != Incoming::Kind::Frame || in.frame.type != protocol::FrameType::Attached) {
            ADD_FAILURE() << "no ATTACHED: " << in.describe();
            return std::nullopt;
        }
        return protocol::decode_attached(in.frame.text()).value;
    }
};

}  // namespace ptyvisor::itest
