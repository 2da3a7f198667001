// Payloads: every encoder's output decodes back to the same value, and every decoder refuses
// hostile JSON (wrong types, missing members, out-of-range numbers, NUL bytes, non-objects,
// deep nesting, invalid JSON, too many entries, too long strings) without throwing.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "protocol/error_code.h"
#include "protocol/frame.h"
#include "protocol/payloads.h"

namespace ptyvisor::protocol {
namespace {

// Every decoder applied to the same text must not throw; returns how many accepted it.
int accepted_by_any(std::string_view text) {
    int n = 0;
    n += decode_start(text) ? 1 : 0;
    n += decode_started(text) ? 1 : 0;
    n += decode_resize(text) ? 1 : 0;
    n += decode_signal(text) ? 1 : 0;
    n += decode_exit(text) ? 1 : 0;
    n += decode_error(text) ? 1 : 0;
    n += decode_status(text) ? 1 : 0;
    return n;
}

StartRequest sample_start() {
    StartRequest s;
    s.argv = {"bash", "-c", "echo \"$HOME\" ü \x01 'x'"};
    s.env = {"PATH=/usr/bin:/bin", "EMPTY=", "LANG=C.UTF-8", "A==b"};
    s.cwd_dev = 0x803;
    s.cwd_ino = 1234567;
    s.term = "xterm-256color";
    s.size = {50, 132};
    return s;
}

const std::string kValidStart =
    R"({"argv":["ls"],"env":["A=1"],"cwd_dev":1,"cwd_ino":2,"term":"xterm","rows":24,"cols":80})";

// Replaces the first occurrence of `from` in `text` by `to` (the test data contains it once).
std::string with(std::string text, std::string_view from, std::string_view to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(PayloadRoundTrip, Start) {
    const StartRequest s = sample_start();
    const auto d = decode_start(encode(s));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, s);
}

TEST(PayloadRoundTrip, StartExtremes) {
    StartRequest s;
    s.argv = {"x"};
    s.cwd_dev = std::numeric_limits<std::uint64_t>::max();
    s.cwd_ino = std::numeric_limits<std::uint64_t>::max();
    s.term = std::string(kMaxTermLength, 't');
    s.size = {1, 1};
    auto d = decode_start(encode(s));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, s);

    s.cwd_dev = 0;
    s.cwd_ino = 0;
    s.term.clear();
    s.size = {65535, 65535};
    d = decode_start(encode(s));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, s);
}

TEST(PayloadRoundTrip, StartAtMaxArgcAndEnvc) {
    StartRequest s;
    s.argv.assign(kMaxArgc, "a");
    s.env.assign(kMaxEnvc, "A=1");
    const std::string text = encode(s);
    EXPECT_LE(text.size(), kMaxPayloadSize);
    const auto d = decode_start(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->argv.size(), kMaxArgc);
    EXPECT_EQ(d.value->env.size(), kMaxEnvc);
}

TEST(PayloadRoundTrip, Started) {
    for (std::int64_t pid : {std::int64_t{0}, std::int64_t{1}, std::int64_t{4242},
                             std::int64_t{std::numeric_limits<std::int32_t>::max()}}) {
        const Started s{"ptyvisor-0123456789abcdef0123456789abcdef.service", pid, "0123456789abcdef0123456789abcdef"};
        const auto d = decode_started(encode(s));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(*d.value, s);
    }
}

TEST(PayloadRoundTrip, Resize) {
    for (const WindowSize w : {WindowSize{1, 1}, WindowSize{24, 80}, WindowSize{65535, 65535},
                               WindowSize{1, 65535}}) {
        const auto d = decode_resize(encode(w));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(*d.value, w);
    }
}

TEST(PayloadRoundTrip, Signal) {
    for (int sig : {1, 2, 9, 15, 28, 64})
        for (auto target : {SignalTarget::Foreground, SignalTarget::Session}) {
            const SignalRequest s{sig, target};
            const auto d = decode_signal(encode(s));
            ASSERT_TRUE(d) << d.error;
            EXPECT_EQ(*d.value, s);
        }
}

TEST(PayloadRoundTrip, ExitEveryKindAndReason) {
    const std::vector<ExitReason> reasons = {
        ExitReason::Exited,      ExitReason::Stopped,      ExitReason::Disconnected,
        ExitReason::ClientStalled, ExitReason::DrainTimeout, ExitReason::Shutdown,
        ExitReason::InputFailed, ExitReason::OutputFailed, ExitReason::Timeout,
        ExitReason::BackendFailed, ExitReason::OomKill, ExitReason::RuntimeLimit, ExitReason::IdleTimeout};
    for (auto reason : reasons) {
        ExitStatus e;
        e.reason = reason;
        e.unit_result = "success";
        e.kind = ExitStatus::Kind::Exited;
        e.code = 0;
        for (int code : {0, 1, 127, 255}) {
            e.code = code;
            const auto d = decode_exit(encode(e));
            ASSERT_TRUE(d) << d.error;
            EXPECT_EQ(*d.value, e);
        }
        e = ExitStatus{};
        e.reason = reason;
        e.kind = ExitStatus::Kind::Signaled;
        e.unit_result = "core-dump";
        for (int sig : {1, 9, 11, 64})
            for (bool core : {false, true}) {
                e.signal = sig;
                e.core_dumped = core;
                const auto d = decode_exit(encode(e));
                ASSERT_TRUE(d) << d.error;
                EXPECT_EQ(*d.value, e);
            }
        e = ExitStatus{};
        e.reason = reason;
        e.kind = ExitStatus::Kind::Unknown;
        const auto d = decode_exit(encode(e));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(*d.value, e);
    }
}

TEST(PayloadRoundTrip, ErrorEveryCode) {
    for (int i = 0; i <= static_cast<int>(ErrorCode::ShuttingDown); ++i) {
        const ErrorReply e{static_cast<ErrorCode>(i), "message with \"quotes\" and ü"};
        const auto d = decode_error(encode(e));
        ASSERT_TRUE(d) << d.error;
        EXPECT_EQ(*d.value, e);
    }
}

TEST(PayloadNames, ErrorCodesAreStable) {
    const std::vector<std::pair<ErrorCode, std::string_view>> names = {
        {ErrorCode::BadFrame, "bad_frame"},
        {ErrorCode::UnsupportedVersion, "unsupported_version"},
        {ErrorCode::TooBig, "too_big"},
        {ErrorCode::UnexpectedFrame, "unexpected_frame"},
        {ErrorCode::WrongFdCount, "wrong_fd_count"},
        {ErrorCode::NotADirectory, "not_a_directory"},
        {ErrorCode::CwdMismatch, "cwd_mismatch"},
        {ErrorCode::NotAllowed, "not_allowed"},
        {ErrorCode::Busy, "busy"},
        {ErrorCode::RateLimited, "rate_limited"},
        {ErrorCode::Overloaded, "overloaded"},
        {ErrorCode::HandshakeTimeout, "handshake_timeout"},
        {ErrorCode::StartFailed, "start_failed"},
        {ErrorCode::Internal, "internal"},
        {ErrorCode::ShuttingDown, "shutting_down"},
        {ErrorCode::ProfileNotAllowed, "profile_not_allowed"},
        {ErrorCode::ProfileUnavailable, "profile_unavailable"},
    };
    for (const auto& [code, name] : names) {
        EXPECT_EQ(to_string(code), name);
        EXPECT_EQ(error_code_from_string(name), code);
    }
    EXPECT_FALSE(error_code_from_string(""));
    EXPECT_FALSE(error_code_from_string("BUSY"));
}

TEST(PayloadNames, ExitReasonsAreStable) {
    const std::vector<std::pair<ExitReason, std::string_view>> names = {
        {ExitReason::Exited, "exited"},
        {ExitReason::Stopped, "stopped"},
        {ExitReason::Disconnected, "disconnected"},
        {ExitReason::ClientStalled, "client_stalled"},
        {ExitReason::DrainTimeout, "drain_timeout"},
        {ExitReason::Shutdown, "shutdown"},
        {ExitReason::InputFailed, "input_failed"},
        {ExitReason::OutputFailed, "output_failed"},
        {ExitReason::Timeout, "timeout"},
        {ExitReason::BackendFailed, "backend_failed"},
        {ExitReason::OomKill, "oom-kill"},
        {ExitReason::RuntimeLimit, "runtime-limit"},
        {ExitReason::IdleTimeout, "idle-timeout"},
    };
    for (const auto& [reason, name] : names) {
        EXPECT_EQ(to_string(reason), name);
        EXPECT_EQ(exit_reason_from_string(name), reason);
    }
    EXPECT_FALSE(exit_reason_from_string("killed"));
}

// Version 6's reasons reach an older client as reasons it knows (docs/protocol.md, 13.2).
TEST(PayloadExit, AnOlderClientIsToldALimitsReasonItKnows) {
    ExitStatus oom;
    oom.kind = ExitStatus::Kind::Signaled;
    oom.signal = 9;
    oom.reason = ExitReason::OomKill;
    EXPECT_EQ(exit_status_for_version(oom, 6), oom);
    const ExitStatus old = exit_status_for_version(oom, 5);
    EXPECT_EQ(old.reason, ExitReason::Exited);
    EXPECT_EQ(old.unit_result, "oom-kill");
    EXPECT_EQ(old.signal, 9);
    for (auto limit : {ExitReason::RuntimeLimit, ExitReason::IdleTimeout}) {
        ExitStatus e;
        e.reason = limit;
        EXPECT_EQ(exit_status_for_version(e, 6).reason, limit);
        for (int version : {1, 2, 5}) EXPECT_EQ(exit_status_for_version(e, version).reason, ExitReason::Timeout);
    }
    ExitStatus plain;
    plain.reason = ExitReason::Stopped;
    EXPECT_EQ(exit_status_for_version(plain, 1), plain);
    EXPECT_FALSE(exit_status_for_version(std::optional<ExitStatus>{}, 5));
}

TEST(PayloadRoundTrip, StartNamesAProfile) {
    StartRequest s = sample_start();
    s.profile = "offline";
    const auto d = decode_start(encode(s));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->profile, "offline");
    EXPECT_EQ(encode(sample_start()).find("profile"), std::string::npos);  // absent unless named
    EXPECT_FALSE(decode_start(with(kValidStart, R"("term")", R"("profile":")" + std::string(65, 'p') + R"(","term")")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("term")", R"("profile":7,"term")")));
}

TEST(PayloadExit, ShellStatus) {
    ExitStatus e;
    e.kind = ExitStatus::Kind::Exited;
    e.code = 3;
    EXPECT_EQ(e.shell_status(), 3);
    e.kind = ExitStatus::Kind::Signaled;
    e.signal = 9;
    EXPECT_EQ(e.shell_status(), 137);
    e.kind = ExitStatus::Kind::Unknown;
    EXPECT_EQ(e.shell_status(), 255);
}

// ---------------------------------------------------------------------------------------------
// Optional members, defaults and forward compatibility

TEST(PayloadOptional, StartTermIsOptional) {
    const auto d = decode_start(with(kValidStart, R"("term":"xterm",)", ""));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->term, "");
}

TEST(PayloadOptional, SignalTargetDefaultsToForeground) {
    const auto d = decode_signal(R"({"signal":2})");
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->signal, 2);
    EXPECT_EQ(d.value->target, SignalTarget::Foreground);
    const auto s = decode_signal(R"({"signal":15,"target":"session"})");
    ASSERT_TRUE(s) << s.error;
    EXPECT_EQ(s.value->target, SignalTarget::Session);
}

TEST(PayloadOptional, ExitUnitResultIsOptional) {
    const auto d = decode_exit(R"({"status":"exited","code":7,"reason":"exited"})");
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->code, 7);
    EXPECT_EQ(d.value->unit_result, "");
}

TEST(PayloadOptional, UnknownMembersAreIgnored) {
    EXPECT_TRUE(decode_start(with(kValidStart, "{", R"({"future":{"x":1},)")));
    EXPECT_TRUE(decode_started(R"({"unit":"u","pid":1,"new":[1,2]})"));
    EXPECT_TRUE(decode_resize(R"({"rows":1,"cols":2,"xpixel":640})"));
    EXPECT_TRUE(decode_signal(R"({"signal":2,"extra":null})"));
    EXPECT_TRUE(decode_exit(R"({"status":"unknown","reason":"shutdown","note":"x"})"));
    EXPECT_TRUE(decode_error(R"({"code":"busy","message":"m","retry_after":5})"));
}

TEST(PayloadOptional, UnknownErrorCodeReadsAsInternal) {
    const auto d = decode_error(R"({"code":"from_the_future","message":"m"})");
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->code, ErrorCode::Internal);
    EXPECT_EQ(d.value->message, "m");
}

TEST(PayloadOptional, MemberOrderDoesNotMatter) {
    const auto d = decode_resize(R"({"cols":80,"rows":24})");
    ASSERT_TRUE(d);
    EXPECT_EQ(*d.value, (WindowSize{24, 80}));
}

// ---------------------------------------------------------------------------------------------
// Wrong types

TEST(PayloadReject, WrongTypes) {
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"("ls")")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"([1])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"([null])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["A=1"])", R"({"A":"1"})")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("cwd_dev":1)", R"("cwd_dev":"1")")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("cwd_dev":1)", R"("cwd_dev":1.0)")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("cwd_ino":2)", R"("cwd_ino":-2)")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("term":"xterm")", R"("term":7)")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("rows":24)", R"("rows":"24")")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("cols":80)", R"("cols":true)")));
    EXPECT_FALSE(decode_started(R"({"unit":5,"pid":1})"));
    EXPECT_FALSE(decode_started(R"({"unit":"u","pid":"1"})"));
    EXPECT_FALSE(decode_started(R"({"unit":"u","pid":1.5})"));
    EXPECT_FALSE(decode_resize(R"({"rows":24.0,"cols":80})"));
    EXPECT_FALSE(decode_resize(R"({"rows":[24],"cols":80})"));
    EXPECT_FALSE(decode_signal(R"({"signal":"2"})"));
    EXPECT_FALSE(decode_signal(R"({"signal":2,"target":1})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":"0","reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":1,"code":0,"reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":0,"reason":"exited","unit_result":0})"));
    EXPECT_FALSE(
        decode_exit(R"({"status":"signaled","signal":9,"core_dumped":1,"reason":"exited"})"));
    EXPECT_FALSE(decode_error(R"({"code":1,"message":"m"})"));
    EXPECT_FALSE(decode_error(R"({"code":"busy","message":null})"));
}

TEST(PayloadReject, UnknownEnumStrings) {
    EXPECT_FALSE(decode_signal(R"({"signal":2,"target":"group"})"));
    EXPECT_FALSE(decode_signal(R"({"signal":2,"target":"Foreground"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"crashed","reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"unknown","reason":"killed"})"));
}

// ---------------------------------------------------------------------------------------------
// Missing members

TEST(PayloadReject, MissingMembersOfStart) {
    ASSERT_TRUE(decode_start(kValidStart));
    for (std::string_view member : {R"("argv":["ls"],)", R"("env":["A=1"],)", R"("cwd_dev":1,)",
                                    R"("cwd_ino":2,)", R"(,"rows":24)", R"(,"cols":80)"}) {
        const auto d = decode_start(with(kValidStart, member, ""));
        EXPECT_FALSE(d) << "without " << member;
        EXPECT_FALSE(d.error.empty());
    }
}

TEST(PayloadReject, MissingMembersOfOthers) {
    EXPECT_FALSE(decode_started(R"({"pid":1})"));
    EXPECT_FALSE(decode_started(R"({"unit":"u"})"));
    EXPECT_FALSE(decode_resize(R"({"rows":24})"));
    EXPECT_FALSE(decode_resize(R"({"cols":80})"));
    EXPECT_FALSE(decode_resize("{}"));
    EXPECT_FALSE(decode_signal(R"({"target":"session"})"));
    EXPECT_FALSE(decode_exit(R"({"code":0,"reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":0})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"signaled","core_dumped":false,"reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"signaled","signal":9,"reason":"exited"})"));
    EXPECT_FALSE(decode_error(R"({"message":"m"})"));
    EXPECT_FALSE(decode_error(R"({"code":"busy"})"));
}

// ---------------------------------------------------------------------------------------------
// Ranges

TEST(PayloadReject, WindowRanges) {
    EXPECT_FALSE(decode_resize(R"({"rows":0,"cols":80})"));
    EXPECT_FALSE(decode_resize(R"({"rows":65536,"cols":80})"));
    EXPECT_FALSE(decode_resize(R"({"rows":24,"cols":0})"));
    EXPECT_FALSE(decode_resize(R"({"rows":24,"cols":65536})"));
    EXPECT_FALSE(decode_resize(R"({"rows":-1,"cols":80})"));
    EXPECT_FALSE(decode_resize(R"({"rows":18446744073709551615,"cols":80})"));
    EXPECT_FALSE(decode_resize(R"({"rows":1e3,"cols":80})"));
    EXPECT_TRUE(decode_resize(R"({"rows":65535,"cols":1})"));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("rows":24)", R"("rows":0)")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("rows":24)", R"("rows":65536)")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("cols":80)", R"("cols":65536)")));
}

TEST(PayloadReject, SignalRanges) {
    EXPECT_FALSE(decode_signal(R"({"signal":0})"));
    EXPECT_FALSE(decode_signal(R"({"signal":65})"));
    EXPECT_FALSE(decode_signal(R"({"signal":-9})"));
    EXPECT_FALSE(decode_signal(R"({"signal":18446744073709551615})"));
    EXPECT_FALSE(decode_signal(R"({"signal":4294967298})"));  // 2 modulo 2^32
    EXPECT_TRUE(decode_signal(R"({"signal":1})"));
    EXPECT_TRUE(decode_signal(R"({"signal":64})"));
}

TEST(PayloadReject, ExitRanges) {
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":256,"reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":-1,"reason":"exited"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"exited","code":4294967296,"reason":"exited"})"));
    EXPECT_TRUE(decode_exit(R"({"status":"exited","code":255,"reason":"exited"})"));
    EXPECT_FALSE(
        decode_exit(R"({"status":"signaled","signal":0,"core_dumped":false,"reason":"exited"})"));
    EXPECT_FALSE(
        decode_exit(R"({"status":"signaled","signal":65,"core_dumped":false,"reason":"exited"})"));
}

TEST(PayloadReject, StartedRanges) {
    EXPECT_FALSE(decode_started(R"({"unit":"u","pid":-1})"));
    EXPECT_FALSE(decode_started(R"({"unit":"u","pid":2147483648})"));
    EXPECT_FALSE(decode_started(R"({"unit":"u","pid":18446744073709551615})"));
    EXPECT_FALSE(decode_started(R"({"unit":")" + std::string(257, 'u') + R"(","pid":1})"));
    EXPECT_TRUE(decode_started(R"({"unit":")" + std::string(256, 'u') + R"(","pid":1})"));
}

TEST(PayloadReject, StartLengthsAndCounts) {
    StartRequest s = sample_start();
    s.argv.assign(kMaxArgc + 1, "a");
    EXPECT_FALSE(decode_start(encode(s)));
    s = sample_start();
    s.env.assign(kMaxEnvc + 1, "A=1");
    EXPECT_FALSE(decode_start(encode(s)));
    s = sample_start();
    s.term = std::string(kMaxTermLength + 1, 't');
    EXPECT_FALSE(decode_start(encode(s)));
}

TEST(PayloadReject, StartSemantics) {
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", "[]")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"([""])")));
    EXPECT_TRUE(decode_start(with(kValidStart, R"(["ls"])", R"(["ls",""])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["A=1"])", R"(["NOEQUALS"])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["A=1"])", R"(["=x"])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["A=1"])", R"([""])")));
    EXPECT_TRUE(decode_start(with(kValidStart, R"(["A=1"])", "[]")));
}

// ---------------------------------------------------------------------------------------------
// NUL bytes, non-objects, depth, invalid JSON

TEST(PayloadReject, NulBytesInStrings) {
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"(["l\u0000s"])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["ls"])", R"(["ls","a\u0000"])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"(["A=1"])", R"(["A=\u0000"])")));
    EXPECT_FALSE(decode_start(with(kValidStart, R"("xterm")", R"("xt\u0000erm")")));
    EXPECT_FALSE(decode_started(R"({"unit":"u\u0000.service","pid":1})"));
    EXPECT_FALSE(decode_signal(R"({"signal":2,"target":"session\u0000"})"));
    EXPECT_FALSE(decode_exit(R"({"status":"unknown","reason":"exited","unit_result":"\u0000"})"));
    EXPECT_FALSE(decode_error(R"({"code":"busy","message":"a\u0000b"})"));
    // A raw NUL is not even valid JSON.
    EXPECT_FALSE(decode_error(std::string("{\"code\":\"busy\",\"message\":\"a\0b\"}", 30)));
}

TEST(PayloadReject, NonObjects) {
    for (std::string_view text : {"[]", "[{}]", "1", "-1", "\"x\"", "null", "true", "false"}) {
        EXPECT_EQ(accepted_by_any(text), 0) << text;
        EXPECT_EQ(decode_resize(text).error, "payload is not a JSON object") << text;
    }
}

TEST(PayloadReject, NestingTooDeep) {
    // Control payloads are flat: an object of scalars and arrays of strings.
    const auto d = decode_start(with(kValidStart, R"(["ls"])", R"([["ls"]])"));
    EXPECT_FALSE(d);
    EXPECT_EQ(d.error, "payload nests too deeply");
    EXPECT_EQ(decode_resize(R"({"rows":24,"cols":80,"x":{"y":{"z":1}}})").error,
              "payload nests too deeply");
    // Deep enough to overflow a recursive parser's stack.
    const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    for (auto* decode : {+[](std::string_view t) { return bool(decode_start(t)); },
                         +[](std::string_view t) { return bool(decode_resize(t)); },
                         +[](std::string_view t) { return bool(decode_error(t)); }})
        EXPECT_FALSE(decode(deep));
    EXPECT_EQ(decode_signal(deep).error, "payload nests too deeply");
    const std::string deep_objects = [] {
        std::string s;
        for (int i = 0; i < 50000; ++i) s += "{\"a\":";
        s += "1";
        s += std::string(50000, '}');
        return s;
    }();
    EXPECT_EQ(accepted_by_any(deep_objects), 0);
}

TEST(PayloadReject, InvalidJson) {
    for (std::string_view text :
         {"", " ", "{", "}", "{\"rows\":24,\"cols\":80,}", "{\"rows\":24 \"cols\":80}",
          "{rows:24,cols:80}", "{'rows':24,'cols':80}", "{\"rows\":24,\"cols\":80} x",
          "{\"rows\":24,\"cols\":80}{}", "{\"rows\":0x18,\"cols\":80}",
          "{\"rows\":24,\"cols\":80,\"s\":\"\xff\xfe\"}", "{\"rows\":NaN,\"cols\":80}",
          "{\"rows\":24,\"cols\":80 /* c */}"}) {
        EXPECT_EQ(accepted_by_any(text), 0) << text;
        const auto d = decode_resize(text);
        EXPECT_FALSE(d.error.empty()) << text;
    }
    EXPECT_EQ(decode_resize("{\"rows\":24,").error, "payload is not valid JSON");
}

TEST(PayloadReject, DuplicateMembersDoNotCrash) {
    // The last value of a duplicate member wins; the range check applies to it.
    const auto d = decode_resize(R"({"rows":0,"rows":24,"cols":80})");
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->rows, 24);
    EXPECT_FALSE(decode_resize(R"({"rows":24,"rows":0,"cols":80})"));
}

TEST(PayloadReject, ValidJsonOfTheWrongPayloadIsRefused) {
    // Each payload, fed to every other decoder, is refused. The one exception: START carries
    // rows and cols, so it also reads as a RESIZE (bit 2).
    const std::vector<std::pair<std::string, unsigned>> texts = {
        {encode(sample_start()), 0b000101u},
        {encode(Started{"u", 1, {}}), 0b000010u},
        {encode(WindowSize{}), 0b000100u},
        {encode(SignalRequest{2, SignalTarget::Session}), 0b001000u},
        {encode(ExitStatus{}), 0b010000u},
        {encode(ErrorReply{ErrorCode::Busy, "m"}), 0b100000u},
    };
    for (const auto& [text, expected] : texts) {
        const bool ok[6] = {bool(decode_start(text)),  bool(decode_started(text)),
                            bool(decode_resize(text)), bool(decode_signal(text)),
                            bool(decode_exit(text)),   bool(decode_error(text))};
        for (unsigned i = 0; i < 6; ++i)
            EXPECT_EQ(ok[i], ((expected >> i) & 1u) != 0) << text << " decoder " << i;
    }
}

TEST(PayloadEncode, InvalidUtf8IsReplacedNotThrown) {
    const ErrorReply e{ErrorCode::BadFrame, "bad byte \xff here"};
    std::string text;
    ASSERT_NO_THROW(text = encode(e));
    const auto d = decode_error(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->code, ErrorCode::BadFrame);
    EXPECT_NE(d.value->message.find("here"), std::string::npos);
}

// Issue 11, finding 1: an ERROR quoting what a client sent (a 5000-byte command name)
// exceeded the 4096-byte ERROR bound, and encode_frame threw. Every message now fits, however
// long, however JSON escapes it, whatever bytes it holds; and it still decodes.
TEST(PayloadEncode, ErrorQuotingHostileTextAlwaysFitsItsFrame) {
    const std::vector<std::string> messages{
        "command not found: " + std::string(5000, 'a'),
        std::string(100000, '\x01'),          // escaped sixfold: \u0001
        std::string(100000, '\xff'),          // not UTF-8: replaced, three bytes each
        std::string(3000, '"'),               // escaped twofold
        "cgroup " + std::string(2000, '/') + std::string(2000, '\xe2'),
    };
    for (const auto& m : messages) {
        const std::string payload = encode(ErrorReply{ErrorCode::StartFailed, m});
        EXPECT_LE(payload.size(), kMaxControlPayloadSize);
        EXPECT_NO_THROW((void)encode_frame(FrameType::Error, payload));
        const auto back = decode_error(payload);
        ASSERT_TRUE(back) << back.error;
        EXPECT_EQ(back.value->code, ErrorCode::StartFailed);
        EXPECT_FALSE(back.value->message.empty());
    }
}

TEST(PayloadEncode, BoundedTextCutsAtACharacterBoundary) {
    EXPECT_EQ(bounded_text("short", 10), "short");
    EXPECT_EQ(bounded_text("abcdefghij", 8), "abcde...");
    // "é" is two bytes: a cut inside it backs up to before it.
    const std::string accents = "ab\xc3\xa9\xc3\xa9\xc3\xa9";
    const std::string cut = bounded_text(accents, 7);
    EXPECT_EQ(cut, "ab\xc3\xa9...");
    EXPECT_LE(cut.size(), 7u);
    // A four-byte character (U+1F600) is never split either.
    const std::string emoji = "\xf0\x9f\x98\x80\xf0\x9f\x98\x80";
    EXPECT_EQ(bounded_text(emoji, 7), "\xf0\x9f\x98\x80...");
    EXPECT_EQ(bounded_text(emoji, 6), "...");
}

// protocol.md 3: members are scalars or arrays of scalars; an array in an array, or an
// object in an array, is nested too deeply, whatever member carries it.
TEST(PayloadReject, ContainersInsideArraysAreTooDeep) {
    for (std::string_view text : {R"({"x":[[]]})", R"({"x":[{}]})", R"({"rows":24,"cols":80,"x":[[1]]})"}) {
        EXPECT_EQ(accepted_by_any(text), 0) << text;
        EXPECT_EQ(decode_resize(text).error, "payload nests too deeply") << text;
    }
    EXPECT_TRUE(decode_resize(R"({"rows":24,"cols":80,"x":[1,"a"]})")) << "an array of scalars is flat";
    EXPECT_TRUE(decode_resize(R"({"rows":24,"cols":80,"x":{"k":1}})")) << "so is an object of scalars";
}

// ---------------------------------------------------------------------------------------------
// STATUS (protocol.md 5.7)

StatusReply sample_status() {
    StatusReply r;
    r.version = "0.1.0";
    r.backend = "systemd";
    r.sessions.push_back({"ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service", 4242, 1234, 1718000000, 512, 65536,
                          "bash", {}, 0, false});
    r.sessions.push_back({"ptyvisor-00000000000000000000000000000000.service", 0, 0, 0, 0, 0, "h\u00e9llo \"x\"", {}, 0, false});
    r.counters = {57, 0, 2, 0, std::nullopt, std::nullopt, {{"busy", 1}, {"not_allowed", 3}}};  // hung_up, quarantined: an older daemon's
    return r;
}

// The daemon's reply as it was before StatusReply existed (server.cpp built it with
// nlohmann::json, whose objects keep their members in name order): an old client reads this.
const std::string kSampleStatusJson =
    R"({"backend":"systemd","counters":{"accepted":57,"evicted":0,"handshake_timeouts":2,"rate_limited":0,)"
    R"("rejected":{"busy":1,"not_allowed":3}},"sessions":[{"argv0":"bash","bytes_in":512,"bytes_out":65536,)"
    R"("peer_pid":1234,"pid":4242,"started_at":1718000000,)"
    R"("unit":"ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service"},{"argv0":"h)" "\xc3\xa9" R"(llo \"x\"","bytes_in":0,)"
    R"("bytes_out":0,"peer_pid":0,"pid":0,"started_at":0,)"
    R"("unit":"ptyvisor-00000000000000000000000000000000.service"}],"version":"0.1.0"})";

TEST(PayloadRoundTrip, Status) {
    const StatusReply r = sample_status();
    const auto d = decode_status(encode(r));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, r);

    StatusReply empty;
    const auto e = decode_status(encode(empty));
    ASSERT_TRUE(e) << e.error;
    EXPECT_EQ(*e.value, empty);
}

TEST(PayloadRoundTrip, StatusExtremes) {
    StatusReply r;
    r.version = std::string(kMaxStatusNameBytes, 'v');
    r.backend = std::string(kMaxStatusNameBytes, 'b');
    constexpr auto kU64 = std::numeric_limits<std::uint64_t>::max();
    r.sessions.push_back({std::string(kMaxStatusUnitBytes, 'u'), std::numeric_limits<std::int32_t>::max(),
                          std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int64_t>::max(), kU64,
                          kU64, std::string(kMaxStatusArgv0Bytes, 'a'), {}, 0, false});
    r.counters = {kU64, kU64, kU64, kU64, kU64, kU64, {}};
    for (std::size_t i = 0; i < kMaxStatusRejectedCodes; ++i)
        r.counters.rejected[std::string(kMaxStatusNameBytes - 3, 'c') + std::to_string(100 + i)] = kU64;
    r.truncated = true;  // a list may say it is incomplete and still carry what it has
    const auto d = decode_status(encode(r));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, r);
}

// The wire format is the one the daemon sent before STATUS had a struct of its own, with one
// member more: counters.hung_up (an older client ignores it; an older daemon leaves it out,
// and EveryFieldIsRead reads that reply).
TEST(PayloadStatus, WireFormatIsUnchangedButForHungUp) {
    EXPECT_EQ(encode(sample_status()), kSampleStatusJson);
    StatusReply counted = sample_status();
    counted.counters.hung_up = 0;
    EXPECT_EQ(encode(counted), with(kSampleStatusJson, R"("handshake_timeouts":2,)", R"("handshake_timeouts":2,"hung_up":0,)"));
    StatusReply truncated;
    truncated.version = "0.1.0";
    truncated.backend = "direct";
    truncated.truncated = true;
    EXPECT_EQ(encode(truncated),
              R"({"backend":"direct","counters":{"accepted":0,"evicted":0,"handshake_timeouts":0,)"
              R"("rate_limited":0,"rejected":{}},"sessions":[],"truncated":true,"version":"0.1.0"})");
}

TEST(PayloadStatus, EveryFieldIsRead) {
    const auto d = decode_status(kSampleStatusJson);
    ASSERT_TRUE(d) << d.error;
    const StatusReply& r = *d.value;
    EXPECT_EQ(r.version, "0.1.0");
    EXPECT_EQ(r.backend, "systemd");
    ASSERT_EQ(r.sessions.size(), 2u);
    const auto& s = r.sessions[0];
    EXPECT_EQ(s.unit, "ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service");
    EXPECT_EQ(s.pid, 4242);
    EXPECT_EQ(s.peer_pid, 1234);
    EXPECT_EQ(s.started_at, 1718000000);
    EXPECT_EQ(s.bytes_in, 512u);
    EXPECT_EQ(s.bytes_out, 65536u);
    EXPECT_EQ(s.argv0, "bash");
    EXPECT_EQ(r.sessions[1].argv0, "h\u00e9llo \"x\"");
    EXPECT_EQ(r.counters.accepted, 57u);
    EXPECT_EQ(r.counters.rate_limited, 0u);
    EXPECT_EQ(r.counters.handshake_timeouts, 2u);
    EXPECT_EQ(r.counters.evicted, 0u);
    EXPECT_FALSE(r.counters.hung_up.has_value());  // absent: a daemon before it counted them
    EXPECT_EQ(r.counters.rejected, (std::map<std::string, std::uint64_t>{{"busy", 1}, {"not_allowed", 3}}));
    const auto h = decode_status(with(kSampleStatusJson, R"("handshake_timeouts":2,)", R"("handshake_timeouts":2,"hung_up":7,)"));
    ASSERT_TRUE(h) << h.error;
    EXPECT_EQ(h.value->counters.hung_up, 7u);
    EXPECT_EQ(decode_status(with(kSampleStatusJson, R"("handshake_timeouts":2,)", R"("handshake_timeouts":2,"hung_up":-7,)")).error,
              "'counters': 'hung_up' must be an unsigned integer");
    EXPECT_FALSE(r.truncated);
    const auto t = decode_status(with(kSampleStatusJson, R"("version")", R"("truncated":true,"version")"));
    ASSERT_TRUE(t) << t.error;
    EXPECT_TRUE(t.value->truncated);
}

// Newer daemons may add members anywhere (within the depth bound); clients ignore them.
TEST(PayloadStatus, UnknownMembersAreIgnored) {
    std::string text = with(kSampleStatusJson, R"({"backend")", R"({"uptime":5,"load":[1,2],"x":{"y":1},"backend")");
    text = with(text, R"({"argv0":"bash")", R"({"cgroup":"/x","argv0":"bash")");
    text = with(text, R"({"accepted":57)", R"({"refused_fds":4,"by_peer":{"1":2},"accepted":57)");
    const auto d = decode_status(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, sample_status());
}

TEST(PayloadReject, MissingMembersOfStatus) {
    ASSERT_TRUE(decode_status(kSampleStatusJson));
    const std::vector<std::pair<std::string_view, std::string_view>> top = {
        {R"("backend":"systemd",)", "'backend' is missing"},
        {R"(,"version":"0.1.0")", "'version' is missing"},
        {R"("accepted":57,)", "'counters': 'accepted' must be an unsigned integer"},
        {R"("evicted":0,)", "'counters': 'evicted' must be an unsigned integer"},
        {R"("handshake_timeouts":2,)", "'counters': 'handshake_timeouts' must be an unsigned integer"},
        {R"("rate_limited":0,)", "'counters': 'rate_limited' must be an unsigned integer"},
        {R"(,"rejected":{"busy":1,"not_allowed":3})", "'counters': 'rejected' must be an object"},
    };
    for (const auto& [member, error] : top) EXPECT_EQ(decode_status(with(kSampleStatusJson, member, "")).error, error);
    // Each member of the first session.
    for (std::string_view member : {R"("argv0":"bash",)", R"("bytes_in":512,)", R"("bytes_out":65536,)",
                                    R"("peer_pid":1234,)", R"("pid":4242,)", R"("started_at":1718000000,)",
                                    R"(,"unit":"ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service")"}) {
        const auto d = decode_status(with(kSampleStatusJson, member, ""));
        EXPECT_FALSE(d) << "without " << member;
        EXPECT_EQ(d.error.rfind("'sessions' entry 0: '", 0), 0u) << d.error;
    }
    const std::string no_sessions = R"({"version":"1","backend":"b","counters":)"
                                    R"({"accepted":0,"evicted":0,"handshake_timeouts":0,"rate_limited":0,"rejected":{}}})";
    EXPECT_EQ(decode_status(no_sessions).error, "'sessions' must be an array");
    EXPECT_EQ(decode_status(R"({"version":"1","backend":"b","sessions":[]})").error, "'counters' must be an object");
    EXPECT_FALSE(decode_status("{}"));
}

TEST(PayloadReject, StatusWrongTypes) {
    const std::vector<std::pair<std::string_view, std::string_view>> swaps = {
        {R"("version":"0.1.0")", R"("version":1)"},
        {R"("backend":"systemd")", R"("backend":null)"},
        {R"("sessions":[)", R"("sessions":{"0":{}},"x":[)"},
        {R"("sessions":[{"argv0":"bash")", R"("sessions":[1,{"argv0":"bash")"},
        {R"("sessions":[{"argv0":"bash")", R"("sessions":[["bash"],{"argv0":"bash")"},
        {R"("counters":{)", R"("counters":[],"c":{)"},
        {R"("rejected":{"busy":1,)", R"("rejected":[1],"r":{"busy":1,)"},
        {R"("busy":1)", R"("busy":"1")"},
        {R"("busy":1)", R"("busy":-1)"},
        {R"("busy":1)", R"("busy":1.0)"},
        {R"("accepted":57)", R"("accepted":-57)"},
        {R"("accepted":57)", R"("accepted":"57")"},
        {R"("pid":4242)", R"("pid":"4242")"},
        {R"("pid":4242)", R"("pid":4242.5)"},
        {R"("argv0":"bash")", R"("argv0":["bash"])"},
        {R"("unit":"ptyvisor-3f1c)", R"("unit":7,"u":"ptyvisor-3f1c)"},
        {R"("bytes_in":512)", R"("bytes_in":-512)"},
        {R"("bytes_out":65536)", R"("bytes_out":true)"},
        {R"("version")", R"("truncated":"yes","version")"},
        {R"("version")", R"("truncated":1,"version")"},
    };
    for (const auto& [from, to] : swaps) {
        const auto d = decode_status(with(kSampleStatusJson, from, to));
        EXPECT_FALSE(d) << to;
        EXPECT_FALSE(d.error.empty()) << to;
    }
}

TEST(PayloadReject, StatusRanges) {
    const std::vector<std::pair<std::string_view, std::string_view>> swaps = {
        {R"("pid":4242)", R"("pid":-1)"},
        {R"("pid":4242)", R"("pid":2147483648)"},
        {R"("peer_pid":1234)", R"("peer_pid":-1234)"},
        {R"("peer_pid":1234)", R"("peer_pid":4294967296)"},
        {R"("started_at":1718000000)", R"("started_at":-1)"},
        {R"("started_at":1718000000)", R"("started_at":9223372036854775808)"},
        {R"("bytes_in":512)", R"("bytes_in":18446744073709551616)"},
    };
    for (const auto& [from, to] : swaps) EXPECT_FALSE(decode_status(with(kSampleStatusJson, from, to))) << to;
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, R"("pid":4242)", R"("pid":2147483647)")));
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, R"("bytes_in":512)", R"("bytes_in":18446744073709551615)")));
}

// Every string, list and map has its bound; one past it is refused.
TEST(PayloadReject, StatusLengthsAndCounts) {
    const auto quoted = [](std::size_t n, char c) { return "\"" + std::string(n, c) + "\""; };
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, R"("0.1.0")", quoted(kMaxStatusNameBytes, 'v'))));
    EXPECT_EQ(decode_status(with(kSampleStatusJson, R"("0.1.0")", quoted(kMaxStatusNameBytes + 1, 'v'))).error,
              "'version' is too long");
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("systemd")", quoted(kMaxStatusNameBytes + 1, 'b'))));
    const std::string unit = R"("ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service")";
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, unit, quoted(kMaxStatusUnitBytes, 'u'))));
    EXPECT_EQ(decode_status(with(kSampleStatusJson, unit, quoted(kMaxStatusUnitBytes + 1, 'u'))).error,
              "'sessions' entry 0: 'unit' is too long");
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, R"("bash")", quoted(kMaxStatusArgv0Bytes, 'a'))));
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("bash")", quoted(kMaxStatusArgv0Bytes + 1, 'a'))));

    // Error code names in "rejected": non-empty, bounded, at most kMaxStatusRejectedCodes.
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("busy")", R"("")")));
    EXPECT_TRUE(decode_status(with(kSampleStatusJson, R"("busy")", quoted(kMaxStatusNameBytes, 'c'))));
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("busy")", quoted(kMaxStatusNameBytes + 1, 'c'))));
    std::string codes;
    for (std::size_t i = 0; i < kMaxStatusRejectedCodes; ++i) codes += "\"c" + std::to_string(i) + "\":1,";
    codes.pop_back();
    constexpr std::string_view kRejected = R"("busy":1,"not_allowed":3)";
    const auto at_bound = decode_status(with(kSampleStatusJson, kRejected, codes));
    ASSERT_TRUE(at_bound) << at_bound.error;
    EXPECT_EQ(at_bound.value->counters.rejected.size(), kMaxStatusRejectedCodes);
    EXPECT_EQ(decode_status(with(kSampleStatusJson, kRejected, codes + R"(,"one_more":1)")).error,
              "'counters': 'rejected' has too many entries");

    // Sessions: at most kMaxStatusSessions (the frame bound keeps real lists far below).
    const std::string session = R"({"argv0":"","bytes_in":0,"bytes_out":0,"peer_pid":0,"pid":0,"started_at":0,"unit":""})";
    std::string many;
    for (std::size_t i = 0; i < kMaxStatusSessions; ++i) many += session + ",";
    many.pop_back();
    const std::string head = R"({"version":"v","backend":"b","counters":{"accepted":0,"evicted":0,)"
                             R"("handshake_timeouts":0,"rate_limited":0,"rejected":{}},"sessions":[)";
    const auto full = decode_status(head + many + "]}");
    ASSERT_TRUE(full) << full.error;
    EXPECT_EQ(full.value->sessions.size(), kMaxStatusSessions);
    EXPECT_EQ(decode_status(head + many + "," + session + "]}").error, "'sessions' has too many entries");
}

TEST(PayloadReject, StatusNulBytes) {
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("0.1.0")", R"("0.1\u0000")")));
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("bash")", R"("ba\u0000sh")")));
    EXPECT_FALSE(decode_status(with(kSampleStatusJson, R"("busy")", R"("bu\u0000sy")")));
}

// STATUS may nest two deep (sessions[] of objects, counters.rejected); deeper is refused,
// whatever member carries it, and deep input costs no stack.
TEST(PayloadReject, StatusNestingTooDeep) {
    for (const auto& [from, to] : std::vector<std::pair<std::string_view, std::string_view>>{
             {R"({"argv0":"bash")", R"({"tags":[[]],"argv0":"bash")"},
             {R"({"argv0":"bash")", R"({"x":{"y":{}},"argv0":"bash")"},
             {R"({"argv0":"bash")", R"({"usage":{"cpu_usec":1},"argv0":"bash")"},
             {R"("busy":1)", R"("busy":{"n":1})"},
             {R"("sessions":[)", R"("sessions":[[[]]],"s":[)"},
             {R"({"backend")", R"({"x":{"y":{"z":{}}},"backend")"}}) {
        EXPECT_EQ(decode_status(with(kSampleStatusJson, from, to)).error, "payload nests too deeply") << to;
    }
    const std::string deep = "{\"sessions\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    EXPECT_EQ(decode_status(deep).error, "payload nests too deeply");
}

TEST(PayloadReject, StatusIsNoOtherPayloadAndNoOtherIsStatus) {
    const std::string status = encode(sample_status());
    EXPECT_EQ(accepted_by_any(status), 1);
    for (const std::string& other : {encode(sample_start()), encode(Started{"u", 1, {}}), encode(WindowSize{}),
                                     encode(SignalRequest{2, SignalTarget::Session}), encode(ExitStatus{}),
                                     encode(ErrorReply{ErrorCode::Busy, "m"})})
        EXPECT_FALSE(decode_status(other)) << other;
}

// encode() stays within the STATUS frame whatever it is given, and what it writes decodes.
TEST(PayloadEncode, StatusAlwaysFitsItsFrame) {
    StatusReply r = sample_status();
    r.sessions.assign(3000, {std::string(kMaxStatusUnitBytes, 'u'), 1, 2, 3, 4, 5, std::string(2000, 'a'), {}, 0, false});
    std::string text = encode(r);
    EXPECT_LE(text.size(), kMaxStatusPayloadSize);
    auto d = decode_status(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_TRUE(d.value->truncated);
    EXPECT_TRUE(d.value->sessions.empty());
    EXPECT_EQ(d.value->counters, r.counters);

    // More sessions than any decoder takes, however small: left out as well.
    r.sessions.assign(kMaxStatusSessions + 1, StatusReply::Session{});
    d = decode_status(encode(r));
    ASSERT_TRUE(d) << d.error;
    EXPECT_TRUE(d.value->truncated);
    EXPECT_TRUE(d.value->sessions.empty());

    // As many as fit are all there.
    r.sessions.assign(1000, {"u.service", 1, 2, 3, 4, 5, "bash", {}, 0, false});
    text = encode(r);
    EXPECT_LE(text.size(), kMaxStatusPayloadSize);
    d = decode_status(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_FALSE(d.value->truncated);
    EXPECT_EQ(d.value->sessions.size(), 1000u);
    EXPECT_NO_THROW((void)encode_frame(FrameType::Status, text));
}

// Strings are cut to their bounds at a character boundary, after invalid UTF-8 and NUL are
// replaced (the JSON encoder's replacement would otherwise come after the cut); numbers out
// of range are clamped. What comes out always decodes.
TEST(PayloadEncode, StatusStringsAndNumbersAreMadeDecodable) {
    StatusReply r;
    r.version = std::string(100, 'v');
    r.backend = "b\xff";
    r.sessions.push_back({std::string(kMaxStatusUnitBytes, '\xff'), -5, std::int64_t{1} << 40, -1, 0, 0,
                          std::string("a\0b", 3) + std::string(3000, '\xe2'), {}, 0, false});
    r.counters.rejected[std::string(100, 'c')] = 1;
    for (std::size_t i = 0; i < 2 * kMaxStatusRejectedCodes; ++i) r.counters.rejected["code" + std::to_string(i)] = i;
    const auto d = decode_status(encode(r));
    ASSERT_TRUE(d) << d.error;
    const auto& s = d.value->sessions.at(0);
    EXPECT_EQ(d.value->version, std::string(kMaxStatusNameBytes - 3, 'v') + "...");
    EXPECT_EQ(d.value->backend, "b\xef\xbf\xbd");
    EXPECT_LE(s.unit.size(), kMaxStatusUnitBytes);
    EXPECT_EQ(s.unit.substr(0, 6), "\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(s.pid, 0);
    EXPECT_EQ(s.peer_pid, std::numeric_limits<std::int32_t>::max());
    EXPECT_EQ(s.started_at, 0);
    EXPECT_EQ(s.argv0.substr(0, 5), "a\xef\xbf\xbd" "b");
    EXPECT_LE(s.argv0.size(), kMaxStatusArgv0Bytes);
    EXPECT_EQ(d.value->counters.rejected.size(), kMaxStatusRejectedCodes);
}

}  // namespace
}  // namespace ptyvisor::protocol

namespace ptyvisor::protocol {
namespace {

// ---------------------------------------------------------------------------------------------
// STATUS for metrics: state, profile and usage per session, and the daemon's life counters.

StatusReply metrics_status() {
    StatusReply r = sample_status();
    auto& s = r.sessions[0];
    s.id = "3f1c0e9a2b7d4c58a6e0f1d2c3b4a596";
    s.state = "running";
    s.profile = "strict";
    s.usage = StatusReply::Session::Usage{};
    s.usage->cpu_usec = 1500000;
    s.usage->memory_peak = 1u << 20;
    s.usage->oom_kills = 0;
    r.sessions[1].state = "ended";
    r.sessions[1].profile = "";
    r.counters.starts = std::map<std::string, std::uint64_t>{{"started", 5}, {"start_failed", 1}};
    r.counters.ended = std::map<std::string, std::uint64_t>{{"exited", 4}};
    r.counters.relayed_in = 10;
    r.counters.relayed_out = 20;
    r.counters.screen_worker_restarts = 1;
    r.counters.admission_waits = 2;
    r.counters.admission_wait_usec = 250000;
    return r;
}

TEST(PayloadRoundTrip, StatusWithMetricsMembers) {
    const StatusReply r = metrics_status();
    const std::string text = encode(r);
    const auto d = decode_status(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, r);
    // Only the figures known are sent, as members of the session: older clients refuse an
    // object nested there (protocol.md 5.7, "Depth").
    EXPECT_NE(text.find(R"("cpu_usec":1500000,"detached":false,"id":"3f1c)"), std::string::npos) << text;
    EXPECT_NE(text.find(R"("memory_peak":1048576,"oom_kills":0,"peer_pid")"), std::string::npos) << text;
    EXPECT_EQ(text.find("usage"), std::string::npos) << text;
    // A usage with no figure is no usage.
    StatusReply empty_usage = r;
    empty_usage.sessions[1].usage = StatusReply::Session::Usage{};
    const auto e = decode_status(encode(empty_usage));
    ASSERT_TRUE(e) << e.error;
    EXPECT_FALSE(e.value->sessions[1].usage);
    EXPECT_NE(text.find(R"("starts":{"start_failed":1,"started":5})"), std::string::npos) << text;
    EXPECT_NE(text.find(R"("admission_wait_usec":250000)"), std::string::npos) << text;
}

// An older daemon's reply has none of them: each stays absent, which the renderer reads as
// "not known" (and leaves out), never as zero.
TEST(PayloadStatus, OlderDaemonHasNoMetricsMembers) {
    const auto d = decode_status(kSampleStatusJson);
    ASSERT_TRUE(d) << d.error;
    for (const auto& s : d.value->sessions) {
        EXPECT_FALSE(s.state);
        EXPECT_FALSE(s.profile);
        EXPECT_FALSE(s.usage);
    }
    const auto& c = d.value->counters;
    EXPECT_FALSE(c.starts);
    EXPECT_FALSE(c.ended);
    EXPECT_FALSE(c.relayed_in);
    EXPECT_FALSE(c.relayed_out);
    EXPECT_FALSE(c.screen_worker_restarts);
    EXPECT_FALSE(c.admission_waits);
    EXPECT_FALSE(c.admission_wait_usec);
}

TEST(PayloadReject, StatusMetricsMembersOfTheWrongShape) {
    const std::string good = encode(metrics_status());
    ASSERT_TRUE(decode_status(good));
    const std::vector<std::pair<std::string_view, std::string_view>> swaps = {
        {R"("state":"running")", R"("state":1)"},
        {R"("profile":"strict")", R"("profile":null)"},
        {R"("cpu_usec":1500000)", R"("cpu_usec":-1)"},
        {R"("cpu_usec":1500000)", R"("cpu_usec":1.5)"},
        {R"("started":5)", R"("started":"5")"},
        {R"("started":5)", R"("":5)"},
        {R"("exited":4)", R"("exited":-4)"},
        {R"("relayed_in":10)", R"("relayed_in":true)"},
        {R"("admission_waits":2)", R"("admission_waits":18446744073709551616)"},
    };
    for (const auto& [from, to] : swaps) {
        const auto d = decode_status(with(good, from, to));
        EXPECT_FALSE(d) << to;
        EXPECT_FALSE(d.error.empty()) << to;
    }
    EXPECT_EQ(decode_status(with(good, R"("state":"running")", "\"state\":\"" + std::string(kMaxStatusNameBytes + 1, 's') + "\"")).error,
              "'sessions' entry 0: 'state' is too long");
    EXPECT_EQ(decode_status(with(good, R"("started":5)", R"("started":"5")")).error,
              "'counters': 'starts' counts must be unsigned integers");
    EXPECT_EQ(decode_status(with(good, R"("started":5)", R"("started":{})")).error, "payload nests too deeply");
}

// `starts` holds one more name than `rejected` ("started"); one past it is refused.
TEST(PayloadReject, StatusStartResultsAreBounded) {
    StatusReply r = metrics_status();
    r.counters.starts->clear();
    for (std::size_t i = 0; i < kMaxStatusStartResults; ++i) (*r.counters.starts)["r" + std::to_string(i)] = i;
    const std::string text = encode(r);
    const auto d = decode_status(text);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(d.value->counters.starts->size(), kMaxStatusStartResults);
    EXPECT_EQ(decode_status(with(text, R"("r0":0)", R"("r0":0,"one_more":1)")).error,
              "'counters': 'starts' has too many entries");
    // The encoder never sends more than the decoder takes.
    (*r.counters.starts)["zz"] = 1;
    const auto cut = decode_status(encode(r));
    ASSERT_TRUE(cut) << cut.error;
    EXPECT_EQ(cut.value->counters.starts->size(), kMaxStatusStartResults);
}

}  // namespace
}  // namespace ptyvisor::protocol
