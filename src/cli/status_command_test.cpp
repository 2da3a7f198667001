#include "cli/status_command.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ptyvisor::cli {
namespace {

TEST(FormatStatus, SessionsTableAndCounters) {
    const std::string report = R"({
        "version": "0.1.0",
        "sessions": [
            {"unit": "ptyvisor-0123.service", "pid": 4242, "peer_pid": 77,
             "started_at": 1714557600, "bytes_in": 12, "bytes_out": 3456,
             "argv0": "bash"},
            {"unit": "ptyvisor-4567.service", "pid": 5000}
        ],
        "counters": {"accepted": 10, "rejected": {"busy": 2}}
    })";
    const std::string text = format_status(report);
    EXPECT_NE(text.find("version: 0.1.0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("sessions: 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("UNIT"), std::string::npos);
    // Columns are aligned: each row starts with the unit and has the command last.
    EXPECT_NE(text.find("ptyvisor-0123.service  4242  77    2024-05-01T10:00:00Z  12  3456  bash\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("ptyvisor-4567.service  5000  -     -                     -   -     -\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("counters:\n"), std::string::npos);
    EXPECT_NE(text.find("  accepted"), std::string::npos);
    EXPECT_NE(text.find("  rejected.busy  2\n"), std::string::npos) << text;
}

TEST(FormatStatus, NoSessions) {
    EXPECT_EQ(format_status(R"({"sessions": []})"), "sessions: 0\n");
}

TEST(FormatStatus, RejectsWhatIsNotAnObject) {
    EXPECT_THROW(format_status("[1,2]"), std::invalid_argument);
    EXPECT_THROW(format_status("not json"), std::invalid_argument);
}

}  // namespace
}  // namespace ptyvisor::cli
