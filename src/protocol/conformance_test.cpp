// Runs the conformance corpus of protocol/conformance (its README.md says what each file
// holds) through the C++ decoders: FrameDecoder for frames of both directions (the daemon and
// src/client read with it), and the payload decoders of payloads.h, session_payloads.h and
// screen_payloads.h. A payload that decodes is encoded again, and the members the case names
// must come back with the values it gives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/frame_decoder.h"
#include "protocol/payloads.h"
#include "protocol/screen_payloads.h"
#include "protocol/command_payloads.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::protocol {
namespace {

using nlohmann::json;

json load(const std::string& file) {
    std::ifstream in(std::string(PTYVISOR_CONFORMANCE_DIR) + "/" + file);
    if (!in) throw std::runtime_error("cannot open the conformance file " + file);
    return json::parse(in);
}

std::vector<std::uint8_t> from_hex(std::string text) {
    std::erase(text, ' ');
    if (text.size() % 2 != 0) throw std::runtime_error("odd hex: " + text);
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i < text.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoul(text.substr(i, 2), nullptr, 16)));
    return out;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (const auto b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 0xf];
    }
    return out;
}

TEST(Conformance, EveryFrameCase) {
    const auto corpus = load("frames.json");
    int run = 0;
    for (const auto& c : corpus.at("cases")) {
        // The connection's negotiated version is checked by the connection (src/server,
        // src/client), not by the decoder: those cases are the clients' decoders'.
        if (c.contains("connection_version")) continue;
        SCOPED_TRACE(c.at("name").get<std::string>());
        auto bytes = from_hex(c.at("bytes").get<std::string>());
        if (c.contains("fill")) {
            const auto fill = from_hex(c.at("fill").at("byte").get<std::string>());
            bytes.insert(bytes.end(), c.at("fill").at("count").get<std::size_t>(), fill.at(0));
        }
        FrameDecoder decoder;
        decoder.feed(bytes);
        json frames = json::array();
        Frame frame;
        auto status = FrameDecoder::Status::Ready;
        while ((status = decoder.next(frame)) == FrameDecoder::Status::Ready)
            frames.push_back({{"type", to_string(frame.type)}, {"version", frame.version},
                              {"length", frame.payload.size()}});
        const std::string end = status == FrameDecoder::Status::NeedMore ? "need_more"
                                                                          : std::string(to_string(decoder.error()));
        EXPECT_EQ(frames, c.at("frames"));
        EXPECT_EQ(end, c.at("end").get<std::string>());
        ++run;
    }
    EXPECT_GT(run, 100);
}

// Decodes `payload` as a frame of type `frame` would be; the value encoded again as JSON, or
// the decoder's refusal.
struct Verdict {
    std::optional<json> value;
    std::string error;
};

template <typename T>
Verdict encoded(const Decoded<T>& d) {
    if (!d) return {std::nullopt, d.error};
    return {json::parse(encode(*d.value)), {}};
}

using PayloadDecoder = std::function<Verdict(std::span<const std::uint8_t>)>;

std::string_view text_of(std::span<const std::uint8_t> bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

template <auto decode>
PayloadDecoder json_decoder() {
    return [](std::span<const std::uint8_t> bytes) { return encoded(decode(text_of(bytes))); };
}

const std::map<std::string, PayloadDecoder>& decoders() {
    static const std::map<std::string, PayloadDecoder> table{
        {"START", json_decoder<decode_start>()},
        {"STARTED", json_decoder<decode_started>()},
        {"RESIZE", json_decoder<decode_resize>()},
        {"SIGNAL", json_decoder<decode_signal>()},
        {"EXIT", json_decoder<decode_exit>()},
        {"ERROR", json_decoder<decode_error>()},
        {"STATUS", json_decoder<decode_status>()},
        {"ATTACH", json_decoder<decode_attach>()},
        {"ATTACHED", json_decoder<decode_attached>()},
        {"DETACHED", json_decoder<decode_detached>()},
        {"SESSIONS",
         [](std::span<const std::uint8_t> bytes) -> Verdict {
             const auto d = decode_sessions(text_of(bytes));
             if (!d) return {std::nullopt, d.error};
             return {json::parse(encode(*d.value)), {}};
         }},
        {"READ", json_decoder<decode_read>()},
        {"LOG", json_decoder<decode_log>()},
        {"WAIT", json_decoder<decode_wait>()},
        {"WAITED", json_decoder<decode_waited>()},
        {"KILL", json_decoder<decode_kill>()},
        {"KILLED", json_decoder<decode_killed>()},
        {"SENT", json_decoder<decode_sent>()},
        {"DROPPED", json_decoder<decode_dropped>()},
        {"SNAPSHOT", json_decoder<decode_snapshot>()},
        {"COMMANDS", json_decoder<decode_commands>()},
        {"COMMAND_LIST", json_decoder<decode_command_list>()},
        {"EXEC", json_decoder<decode_exec>()},
        {"EXECUTED", json_decoder<decode_executed>()},
        {"WATCH", json_decoder<decode_watch>()},
        {"EVENT", json_decoder<decode_event>()},
        {"SCREEN",
         [](std::span<const std::uint8_t> bytes) -> Verdict {
             return encoded(decode_screen(text_of(bytes)));
         }},
        {"SEND",
         [](std::span<const std::uint8_t> bytes) -> Verdict {
             const auto d = decode_send(bytes);
             if (!d) return {std::nullopt, d.error};
             return {json{{"id", d.value->id}, {"input_hex", to_hex(d.value->input)}}, {}};
         }},
    };
    return table;
}

TEST(Conformance, EveryPayloadCase) {
    const auto corpus = load("payloads.json");
    int run = 0;
    for (const auto& c : corpus.at("cases")) {
        const auto name = c.at("name").get<std::string>();
        SCOPED_TRACE(name);
        std::vector<std::uint8_t> payload;
        if (c.contains("payload_hex")) {
            payload = from_hex(c.at("payload_hex").get<std::string>());
        } else {
            const auto text = c.at("payload").get<std::string>();
            payload.assign(text.begin(), text.end());
        }
        const auto decoder = decoders().find(c.at("frame").get<std::string>());
        ASSERT_NE(decoder, decoders().end()) << "no C++ decoder for " << c.at("frame");
        const auto verdict = decoder->second(payload);
        if (c.contains("error")) {
            // Every payload refusal of the C++ decoders is answered with this code.
            EXPECT_EQ(c.at("error").get<std::string>(), to_string(ErrorCode::BadFrame));
            EXPECT_FALSE(verdict.value) << "accepted: " << verdict.value->dump();
        } else {
            ASSERT_TRUE(verdict.value) << "refused: " << verdict.error;
            for (const auto& [member, value] : c.at("members").items()) {
                ASSERT_TRUE(verdict.value->contains(member)) << member << " not in " << verdict.value->dump();
                EXPECT_EQ(verdict.value->at(member), value) << member;
            }
        }
        ++run;
    }
    EXPECT_GT(run, 100);
}

}  // namespace
}  // namespace ptyvisor::protocol
