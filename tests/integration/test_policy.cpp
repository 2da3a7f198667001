// The administrator's policy on STARTs, and the audit of what was done (docs/policy.md): a
// denied START is ERROR denied with the policy's reason (`ptyvisor run` exits 255 and prints
// it), a near miss runs, and `ptyvisor audit --json` reads back every act in order.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixture.h"
#include "support/util.h"

namespace ptyvisor::itest {
namespace {

constexpr Millis kEnd{30000};

class PolicyAndAudit : public EndToEnd {
protected:
    DaemonConfig policed_config() {
        DaemonConfig cfg = config();
        // The file, on both backends: the systemd harness has a journald, which "auto" would
        // choose; the journal's sink is tested on its own (AuditLog.*, policy_test).
        cfg.tables_toml = R"([audit]
sink = "file"
[policy]
default = "allow"
[[policy.rules]]
argv = ["echo", "launch"]
decision = "deny"
reason = "launches go through review"
[[policy.rules]]
pattern = '^sh -c .*curl'
decision = "deny"
reason = "no downloads from a session"
)";
        return cfg;
    }
    struct Ran {
        int status = -1;
        std::string out, err, transcript;
    };
    Ran ptyvisor(const std::vector<std::string>& args) {
        Ran r;
        auto c = run_cli(args);
        if (!c) return r;
        const auto exit = c->wait_exit(kEnd);
        if (!exit) ADD_FAILURE() << "the CLI did not exit; " << c->transcript();
        r.status = exit ? exit->shell() : -1;
        r.out = c->out();
        r.err = c->err();
        r.transcript = c->transcript();
        return r;
    }
    // `ptyvisor audit --json`, run by root as an administrator would: one object a line.
    std::vector<nlohmann::json> audit_records() {
        const std::string command = cli_binary() + " audit --json --file " + config().state_directory + "/audit.jsonl";
        std::vector<nlohmann::json> records;
        FILE* out = ::popen(command.c_str(), "r");
        if (!out) {
            ADD_FAILURE() << "cannot run " << command;
            return records;
        }
        std::string text;
        char buffer[4096];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, out)) > 0;) text.append(buffer, n);
        EXPECT_EQ(::pclose(out), 0) << command;
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            EXPECT_TRUE(j.is_object()) << line;
            if (j.is_object()) records.push_back(std::move(j));
        }
        return records;
    }
};

TEST_F(PolicyAndAudit, ADeniedStartExits255WithThePolicysReasonAndANearMissRuns) {
    ASSERT_NE(start_daemon(policed_config()), nullptr);
    const Ran denied = ptyvisor({"run", "--", "echo", "launch", "now"});
    EXPECT_EQ(denied.status, 255) << denied.transcript;
    EXPECT_NE(denied.err.find("launches go through review"), std::string::npos) << denied.transcript;
    EXPECT_NE(denied.err.find("(denied)"), std::string::npos) << denied.transcript;
    EXPECT_EQ(denied.out, "");
    // Whole words: "launcher" is not "launch", and "echo" alone is no match of the prefix.
    const Ran near = ptyvisor({"run", "--", "echo", "launcher"});
    EXPECT_EQ(near.status, 0) << near.transcript;
    EXPECT_NE(near.out.find("launcher"), std::string::npos) << near.transcript;
    const Ran pattern = ptyvisor({"run", "--", "sh", "-c", "true && curl http://127.0.0.1:9/x"});
    EXPECT_EQ(pattern.status, 255) << pattern.transcript;
    EXPECT_NE(pattern.err.find("no downloads from a session"), std::string::npos) << pattern.transcript;
}

TEST_F(PolicyAndAudit, TheAuditHoldsEveryActInOrder) {
    ASSERT_NE(start_daemon(policed_config()), nullptr);
    EXPECT_EQ(ptyvisor({"run", "--", "echo", "launch"}).status, 255);
    const Ran started = ptyvisor({"run", "--detach", "--", "cat"});
    ASSERT_EQ(started.status, 0) << started.transcript;
    const std::string id = started.out.substr(0, 32);
    EXPECT_EQ(ptyvisor({"send", id, "typed words"}).status, 0);
    EXPECT_EQ(ptyvisor({"kill", id}).status, 0);
    const auto records = audit_records();
    std::vector<std::string> kinds;
    for (const auto& r : records) kinds.push_back(r.value("kind", "?") + (r.contains("decision") ? ":" + r.value("decision", "") : ""));
    const std::vector<std::string> expected{"start:deny", "start:allow", "send", "kill", "end"};
    EXPECT_EQ(kinds, expected) << nlohmann::json(records).dump();
    if (records.size() != expected.size()) return;
    EXPECT_EQ(records[0]["argv"], nlohmann::json({"echo", "launch"}));
    EXPECT_EQ(records[0].value("reason", ""), "launches go through review");
    EXPECT_TRUE(records[0]["session"].is_null());
    for (std::size_t i = 1; i < records.size(); ++i) EXPECT_EQ(records[i].value("session", ""), id) << records[i];
    EXPECT_EQ(records[1]["argv"], nlohmann::json({"cat"}));
    EXPECT_EQ(records[2].value("text", ""), "typed words");
    for (std::size_t i = 1; i < records.size(); ++i)
        EXPECT_GE(records[i].value("time_usec", 0LL), records[i - 1].value("time_usec", 0LL));
}

}  // namespace
}  // namespace ptyvisor::itest
