#include "protocol/command_payloads.h"

#include <gtest/gtest.h>

namespace ptyvisor::protocol {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef";

CommandRecord ended_record() {
    CommandRecord r;
    r.seq = 3;
    r.command = "make -j2 'x y'";
    r.cwd = "/home/agent/é";
    r.output_start = 100;
    r.output_end = 250;
    r.exit_code = 2;
    r.started_ms = 1'700'000'000'000;
    r.ended_ms = 1'700'000'000'500;
    return r;
}

TEST(CommandPayloads, RecordsRoundTripRunningAndEnded) {
    CommandRecord running;
    running.seq = 1;
    running.output_start = 7;
    running.started_ms = 5;
    for (const auto& r : {ended_record(), running}) {
        const auto decoded = decode_command_record(encode(r));
        ASSERT_TRUE(decoded) << decoded.error;
        EXPECT_EQ(*decoded.value, r);
    }
    EXPECT_EQ(encode(running),
              R"({"command":"","cwd":"","ended_ms":null,"exit_code":null,"output_end":null,"output_start":7,"seq":1,"started_ms":5})");
}

TEST(CommandPayloads, ARecordWhoseOutputEndsBeforeItStartsIsRefused) {
    auto r = ended_record();
    r.output_end = 10;
    EXPECT_FALSE(decode_command_record(encode(r)));
}

TEST(CommandPayloads, RepliesRoundTrip) {
    CommandListReply list{kId, "bash", true, true, std::nullopt, {ended_record()}, 3};
    auto l = decode_command_list(encode(list));
    ASSERT_TRUE(l) << l.error;
    EXPECT_EQ(*l.value, list);

    ExecReply exec{kId, ExecReply::Outcome::WaitingForInput, std::nullopt, ended_record(), 900, State::Running};
    auto e = decode_executed(encode(exec));
    ASSERT_TRUE(e) << e.error;
    EXPECT_EQ(*e.value, exec);

    SessionEvent input{SessionEvent::Kind::Input, 42, std::nullopt, 1234, std::nullopt};
    auto i = decode_event(encode(input));
    ASSERT_TRUE(i) << i.error;
    EXPECT_EQ(*i.value, input);
    SessionEvent end{SessionEvent::Kind::CommandEnd, 43, ended_record(), 0, std::nullopt};
    auto d = decode_event(encode(end));
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(*d.value, end);
}

TEST(CommandPayloads, ExecRequestDefaultsAndBounds) {
    auto ok = decode_exec(R"({"id":")" + kId + R"(","command":"ls -l\tx"})");
    ASSERT_TRUE(ok) << ok.error;
    EXPECT_EQ(ok.value->timeout_ms, kDefaultExecTimeoutMs);
    EXPECT_FALSE(ok.value->interrupt);

    for (const char* bad : {R"("command":"")", R"("command":"ls\nrm -rf x")", R"("command":"ls\r")",
                            R"("command":"a\u001b[2J")", R"("command":"ls","timeout_ms":0)",
                            R"("command":"ls","timeout_ms":86400001)", R"("command":17)"}) {
        const auto d = decode_exec(R"({"id":")" + kId + R"(",)" + bad + "}");
        EXPECT_FALSE(d) << bad;
    }
    EXPECT_FALSE(decode_exec(R"({"id":")" + kId + R"(","command":")" + std::string(kMaxExecCommand + 1, 'x') + R"("})"));
    EXPECT_TRUE(decode_exec(R"({"id":")" + kId + R"(","command":")" + std::string(kMaxExecCommand, 'x') + R"("})"));
}

TEST(CommandPayloads, InvalidUtf8InACommandLineIsRefused) {
    std::string why;
    EXPECT_FALSE(is_exec_command("ls \xff", why));
    EXPECT_NE(why.find("UTF-8"), std::string::npos);
    EXPECT_TRUE(is_exec_command("echo héllo", why));
}

TEST(CommandPayloads, RequestsNeedASessionId) {
    EXPECT_FALSE(decode_commands(R"({"id":"nope"})"));
    EXPECT_FALSE(decode_watch(R"({})"));
    const auto c = decode_commands(R"({"id":")" + kId + R"(","since":4})");
    ASSERT_TRUE(c) << c.error;
    EXPECT_EQ(c.value->since, 4u);
}

}  // namespace
}  // namespace ptyvisor::protocol
