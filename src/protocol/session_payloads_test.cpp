#include "protocol/session_payloads.h"

#include <gtest/gtest.h>

#include <string>

namespace ptyvisor::protocol {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef";

ExitStatus exited(int code) {
    ExitStatus e;
    e.kind = ExitStatus::Kind::Exited;
    e.code = code;
    return e;
}

TEST(SessionPayloads, SessionIdsAreThirtyTwoLowercaseHexDigits) {
    EXPECT_TRUE(is_session_id(kId));
    EXPECT_FALSE(is_session_id(kId.substr(1)));
    EXPECT_FALSE(is_session_id(kId + "0"));
    EXPECT_FALSE(is_session_id("0123456789ABCDEF0123456789abcdef"));
    EXPECT_FALSE(is_session_id("../../../../etc/passwd0123456789"));
}

TEST(SessionPayloads, RequestsRoundTrip) {
    for (const auto& a : {AttachRequest{kId, {LogPosition::Kind::Start, 0}, true, false},
                          AttachRequest{kId, {LogPosition::Kind::Offset, 1ull << 40}, false, true},
                          AttachRequest{kId, {LogPosition::Kind::Tail, 0}, false, false}}) {
        const auto d = decode_attach(encode(a));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(*d.value, a);
    }
    const ReadRequest r{kId, {LogPosition::Kind::Offset, 7}, 100};
    EXPECT_EQ(*decode_read(encode(r)).value, r);
    WaitRequest w;
    w.id = kId;
    w.what = WaitRequest::For::Text;
    w.pattern = "listening on \\d+";
    w.from = {LogPosition::Kind::Tail, 0};
    w.timeout_ms = 1234;
    EXPECT_EQ(*decode_wait(encode(w)).value, w);
    w.what = WaitRequest::For::Quiet;
    w.pattern.clear();
    w.from = {};
    w.quiet_ms = 500;
    EXPECT_EQ(*decode_wait(encode(w)).value, w);
    const KillRequest k{kId, 15};
    EXPECT_EQ(*decode_kill(encode(k)).value, k);
}

TEST(SessionPayloads, RepliesRoundTrip) {
    SessionInfo s;
    s.id = kId;
    s.unit = "ptyvisor-" + kId + ".service";
    s.argv = {"npm", "run", "dev"};
    s.cwd = "/home/agent/app";
    s.state = State::Exited;
    s.exit = exited(3);
    s.offset = 99;
    s.clients = 2;
    s.created = 1764547200;
    s.detached = true;
    const auto list = decode_sessions(encode(std::vector<SessionInfo>{s, s}));
    ASSERT_TRUE(list) << list.error;
    ASSERT_EQ(list.value->size(), 2u);
    EXPECT_EQ(list.value->front(), s);

    const LogReply l{kId, 10, 12, 30, 42, State::Running, std::nullopt};
    EXPECT_EQ(*decode_log(encode(l)).value, l);
    WaitReply w;
    w.matched = true;
    w.reason = "text";
    w.offset = 50;
    w.match_start = 3;
    w.match_end = 9;
    EXPECT_EQ(*decode_waited(encode(w)).value, w);
    const AttachedReply a{kId, s.unit, 42, true, 0, 10, 5, State::Running, {50, 132}};
    EXPECT_EQ(*decode_attached(encode(a)).value, a);
    EXPECT_EQ(*decode_detached(encode(DetachedReply{7, "taken_over"})).value, (DetachedReply{7, "taken_over"}));
    EXPECT_EQ(*decode_killed(encode(KillReply{kId, State::Exited, exited(0)})).value,
              (KillReply{kId, State::Exited, exited(0)}));
    EXPECT_EQ(*decode_dropped(encode(DroppedNotice{100, 40})).value, (DroppedNotice{100, 40}));
    EXPECT_EQ(decode_sent(encode(SentReply{6})).value->bytes, 6u);
}

// A server builds LIST from entries whose fixed part it encoded once: the reply is the same
// list, and a cut one says so.
TEST(SessionPayloads, ListBuiltFromCachedFixedFieldsDecodesToTheSameSessions) {
    SessionInfo s;
    s.id = kId;
    s.unit = "ptyvisor-" + kId + ".service";
    s.argv = {"sh", "-c", "echo \"quoted\" \u00e9"};
    s.cwd = "/tmp";
    s.state = State::Running;
    s.pid = 77;
    s.start = 5;
    s.offset = 1234;
    s.clients = 1;
    s.created = 1764547200;
    s.detached = true;
    SessionInfo changing = s;
    changing.id.clear();
    changing.argv.clear();
    changing.cwd.clear();
    changing.unit.clear();
    const std::string entry = session_entry(session_fixed_fields(s), changing);
    const auto list = decode_sessions(encode_sessions({entry, entry}, /*truncated=*/false));
    ASSERT_TRUE(list) << list.error;
    ASSERT_EQ(list.value->size(), 2u);
    EXPECT_EQ(list.value->back(), s);
    EXPECT_EQ(encode_sessions({entry}, false), encode(std::vector<SessionInfo>{s}));
    EXPECT_NE(encode_sessions({entry}, true).find(R"("truncated":true)"), std::string::npos);
    EXPECT_TRUE(decode_sessions(encode_sessions({}, true)));
}

// Version 6: the profile is a fixed field, the usage a changing one; both decode back.
TEST(SessionPayloads, ListCarriesTheProfileAndTheUsageItKnows) {
    SessionInfo s;
    s.id = kId;
    s.unit = "ptyvisor-" + kId + ".service";
    s.argv = {"make"};
    s.created = 1764547200;
    s.profile = "offline";
    UsageInfo u;
    u.cpu_usec = 1234567;
    u.memory_peak = 1ull << 33;
    u.oom_kills = 0;
    s.usage = u;
    SessionInfo changing = s;
    changing.profile.clear();
    const std::string entry = session_entry(session_fixed_fields(s), changing);
    EXPECT_NE(entry.find(R"("profile":"offline")"), std::string::npos) << entry;
    EXPECT_NE(entry.find(R"("usage":{"cpu_usec":1234567,"memory_peak":8589934592,"oom_kills":0})"), std::string::npos)
        << entry;
    const auto list = decode_sessions(encode_sessions({entry}, false));
    ASSERT_TRUE(list) << list.error;
    EXPECT_EQ(list.value->front(), s);
    // Absent from a session without them, as from an older daemon's reply.
    SessionInfo plain = s;
    plain.profile.clear();
    plain.usage.reset();
    const std::string bare = session_entry(session_fixed_fields(plain), plain);
    EXPECT_EQ(bare.find("profile"), std::string::npos);
    EXPECT_EQ(bare.find("usage"), std::string::npos);
    EXPECT_FALSE(decode_sessions(R"({"sessions":[)" + bare.substr(0, bare.size() - 1) + R"(,"usage":{"cpu_usec":-1}}]})"));
}

// Requests come from the agent: every member is bounded, and anything unexpected refused.
TEST(SessionPayloads, HostileRequestsAreRefusedWithAReason) {
    const std::vector<std::string> bad_attach = {
        R"({})",
        R"({"id":"x"})",
        R"({"id":"0123456789ABCDEF0123456789abcdef"})",
        R"({"id":")" + kId + R"(","role":"root"})",
        R"({"id":")" + kId + R"(","from":-1})",
        R"({"id":")" + kId + R"(","from":"middle"})",
        R"({"id":")" + kId + R"(","from":[0]})",
        R"({"id":")" + kId + R"(","takeover":"yes"})",
        R"([")" + kId + R"("])",
        "not json",
    };
    for (const auto& text : bad_attach) {
        const auto d = decode_attach(text);
        EXPECT_FALSE(d) << text;
        EXPECT_FALSE(d.error.empty()) << text;
    }
    const std::string id = R"("id":")" + kId + R"(")";
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"text"})"));                      // no pattern
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"text","pattern":""})"));         // empty
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"text","pattern":")" + std::string(2000, 'a') + "\"}"));
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"quiet"})"));                     // no quiet_ms
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"quiet","quiet_ms":0})"));
    EXPECT_FALSE(decode_wait("{" + id + R"(,"timeout_ms":999999999999})"));
    EXPECT_FALSE(decode_wait("{" + id + R"(,"for":"reboot"})"));
    EXPECT_FALSE(decode_read("{" + id + R"(,"max_bytes":99999999999})"));
    EXPECT_FALSE(decode_kill("{" + id + R"(,"signal":65})"));
    EXPECT_FALSE(decode_kill("{" + id + R"(,"signal":-9})"));
}

TEST(SessionPayloads, SendCarriesAnIdThenItsBytes) {
    const std::string text = "ls -l\r";
    const auto payload = encode_send(kId, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    const auto d = decode_send(payload);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->id, kId);
    EXPECT_EQ(std::string(d.value->input.begin(), d.value->input.end()), text);
    const std::vector<std::uint8_t> only_id(kId.begin(), kId.end());
    EXPECT_FALSE(decode_send(only_id)) << "SEND without input";
    std::vector<std::uint8_t> bad_id(32, 'Z');
    bad_id.push_back('x');
    EXPECT_FALSE(decode_send(bad_id));
}

}  // namespace
}  // namespace ptyvisor::protocol
