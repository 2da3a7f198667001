#include "cli/status_command.h"

#include <gtest/gtest.h>

namespace ptyvisor::cli {
namespace {

protocol::StatusReply sample_report() {
    protocol::StatusReply r;
    r.version = "0.1.0";
    r.backend = "direct";
    r.sessions.push_back({"ptyvisor-0123.service", 4242, 77, 1714557600, 12, 3456, "bash", {}, 0, false});
    r.sessions.push_back({"ptyvisor-4567.service", 5000, 1, 0, 0, 0, "vi", {}, 0, false});
    r.counters.accepted = 10;
    r.counters.evicted = 1;
    r.counters.hung_up = 4;
    r.counters.rejected = {{"busy", 2}, {"not_allowed", 3}};
    return r;
}

TEST(FormatStatus, SessionsTableAndCounters) {
    const std::string text = format_status(sample_report());
    EXPECT_EQ(text.rfind("backend: direct\nversion: 0.1.0\nsessions: 2\n", 0), 0u) << text;
    EXPECT_NE(text.find("UNIT"), std::string::npos);
    // Columns are aligned: each row starts with the unit and has the command last.
    EXPECT_NE(text.find("ptyvisor-0123.service  4242  77    2024-05-01T10:00:00Z  12  3456  bash\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("ptyvisor-4567.service  5000  1     1970-01-01T00:00:00Z  0   0     vi\n"),
              std::string::npos)
        << text;
    // The counters in the order of their names, as the report's JSON has them.
    EXPECT_NE(text.find("counters:\n"
                        "  accepted              10\n"
                        "  evicted               1\n"
                        "  handshake_timeouts    0\n"
                        "  hung_up               4\n"
                        "  rate_limited          0\n"
                        "  rejected.busy         2\n"
                        "  rejected.not_allowed  3\n"),
              std::string::npos)
        << text;
}

// A daemon that lists the ended sessions it keeps (for metrics): the table shows live ones.
TEST(FormatStatus, EndedSessionsAreLeftOutOfTheTable) {
    protocol::StatusReply r = sample_report();
    r.sessions[0].state = "running";
    r.sessions[1].state = "ended";
    const std::string text = format_status(r);
    EXPECT_NE(text.find("sessions: 1\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("ptyvisor-4567.service"), std::string::npos) << text;
}

TEST(FormatStatus, NoSessions) {
    protocol::StatusReply r;
    r.version = "0.1.0";
    r.backend = "systemd";
    EXPECT_EQ(format_status(r),
              "backend: systemd\nversion: 0.1.0\nsessions: 0\ncounters:\n"
              "  accepted            0\n  evicted             0\n  handshake_timeouts  0\n  rate_limited        0\n");
}

TEST(FormatStatus, SaysWhenTheSessionListWasLeftOut) {
    protocol::StatusReply r = sample_report();
    r.sessions.clear();
    r.truncated = true;
    const std::string text = format_status(r);
    EXPECT_EQ(text.rfind("backend: direct\ntruncated: true\nversion: 0.1.0\nsessions: 0\n", 0), 0u) << text;
}

// What the report looked like when the CLI formatted the daemon's JSON itself: a report the
// daemon sent then (before `hung_up`) decodes, and prints as it did then.
TEST(FormatStatus, TheDaemonsJsonPrintsAsBefore) {
    const std::string json =
        R"({"backend":"direct","counters":{"accepted":1,"evicted":0,"handshake_timeouts":0,)"
        R"("rate_limited":0,"rejected":{}},"sessions":[{"argv0":"bash","bytes_in":0,"bytes_out":5,)"
        R"("peer_pid":9,"pid":5,"started_at":1714557600,"unit":"u.service"}],"version":"0.1.0"})";
    const auto d = protocol::decode_status(json);
    ASSERT_TRUE(d) << d.error;
    EXPECT_EQ(format_status(*d.value),
              "backend: direct\nversion: 0.1.0\nsessions: 1\n"
              "UNIT       PID  PEER  STARTED               IN  OUT  COMMAND\n"
              "u.service  5    9     2024-05-01T10:00:00Z  0   5    bash\n"
              "counters:\n  accepted            1\n  evicted             0\n  handshake_timeouts  0\n"
              "  rate_limited        0\n");
}

}  // namespace
}  // namespace ptyvisor::cli
