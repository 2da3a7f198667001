// Sandbox profiles through the daemon (docs/configuration.md, "[profiles.NAME]"; docs/protocol.md,
// section 13): which profile a START gets, the limits the server enforces on every backend
// (runtime_max, idle_timeout) and the EXIT reasons that say which one ended a session, and what
// `ptyvisor ls --json` shows. What the backends enforce (memory, tasks, CPU, network, file
// system) is tested with each backend (src/backends/*/, tests/systemd/).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

constexpr Millis kEnd{30000};

class Profiles : public EndToEnd {
protected:
    DaemonConfig profiled_config() {
        DaemonConfig cfg = config();
        cfg.allowed_profiles = {"short", "idle"};
        cfg.default_profile = "timed";
        cfg.profiles_toml = R"([profiles.short]
runtime_max = 1
[profiles.idle]
idle_timeout = 1
[profiles.timed]
runtime_max = 3600
[profiles.secret]
runtime_max = 5
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
    std::string start_detached(const std::string& profile, const std::vector<std::string>& argv) {
        std::vector<std::string> args{"run", "--detach"};
        if (!profile.empty()) args.insert(args.end(), {"--profile", profile});
        args.push_back("--");
        args.insert(args.end(), argv.begin(), argv.end());
        const Ran r = ptyvisor(args);
        EXPECT_EQ(r.status, 0) << r.transcript;
        return r.out.size() >= 32 ? r.out.substr(0, 32) : std::string();
    }
    nlohmann::json listed(const std::string& id) {
        const Ran r = ptyvisor({"ls", "--json"});
        EXPECT_EQ(r.status, 0) << r.transcript;
        const auto all = nlohmann::json::parse(r.out, nullptr, false);
        if (all.is_array())
            for (const auto& s : all)
                if (s.value("id", "") == id) return s;
        ADD_FAILURE() << id << " is not in " << r.out;
        return nlohmann::json::object();
    }
    // `ptyvisor wait ID`: until the session has exited.
    void wait_for_end(const std::string& id) {
        const Ran r = ptyvisor({"wait", "--timeout", "20", id});
        EXPECT_NE(r.status, 124) << "did not end: " << r.transcript;
    }
};

TEST_F(Profiles, AgentNamesAProfileItMayNotChooseAndRunExits255SayingWhy) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    for (const std::string name : {"secret", "nonexistent"}) {
        const Ran r = ptyvisor({"run", "--profile", name, "--", "true"});
        EXPECT_EQ(r.status, 255) << r.transcript;
        EXPECT_NE(r.err.find("profile_not_allowed"), std::string::npos) << r.transcript;
        EXPECT_NE(r.err.find("allowed: short idle"), std::string::npos) << r.transcript;
    }
}

TEST_F(Profiles, RuntimeMaxEndsTheSessionAndSaysSo) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const Ran r = ptyvisor({"run", "--profile", "short", "--", "sleep", "60"});
    EXPECT_NE(r.status, 0) << r.transcript;
    EXPECT_NE(r.err.find("session ended: runtime-limit"), std::string::npos) << r.transcript;
}

TEST_F(Profiles, IdleTimeoutEndsAQuietSessionButNotABusyOne) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const std::string quiet = start_detached("idle", {"sleep", "60"});
    // Prints every 0.2 s for 2 s: never quiet for the 1 s the profile allows.
    const std::string busy =
        start_detached("idle", {"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick; sleep 0.2; done"});
    ASSERT_EQ(quiet.size(), 32u);
    ASSERT_EQ(busy.size(), 32u);
    wait_for_end(quiet);
    wait_for_end(busy);
    const auto q = listed(quiet);
    const auto b = listed(busy);
    EXPECT_EQ(q["exit"].value("reason", ""), "idle-timeout") << q.dump();
    EXPECT_EQ(b["exit"].value("reason", ""), "exited") << b.dump();
    EXPECT_EQ(b["exit"].value("code", -1), 0) << b.dump();
    EXPECT_EQ(q.value("profile", ""), "idle");
}

TEST_F(Profiles, WithoutANameTheDefaultProfileApplies) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const std::string id = start_detached("", {"sleep", "60"});
    ASSERT_EQ(id.size(), 32u);
    const auto s = listed(id);
    EXPECT_EQ(s.value("profile", ""), "timed") << s.dump();
    // SPEC's usage members are always there (null where the host does not count them).
    ASSERT_TRUE(s["usage"].is_object()) << s.dump();
    for (const char* key : {"cpu_usec", "memory_peak", "tasks_peak", "oom_kills"})
        EXPECT_TRUE(s["usage"].contains(key)) << key << " in " << s.dump();
    EXPECT_EQ(ptyvisor({"kill", id}).status, 0);
}

// A client that speaks version 5 knows no runtime-limit: it is told timeout, a reason it knows,
// in LIST as in EXIT (docs/protocol.md, 13.2).
TEST_F(Profiles, AVersionFiveClientIsToldALimitAsTimeout) {
    ASSERT_NE(start_daemon(profiled_config()), nullptr);
    const std::string id = start_detached("short", {"sleep", "60"});
    ASSERT_EQ(id.size(), 32u);
    wait_for_end(id);
    EXPECT_EQ(listed(id)["exit"].value("reason", ""), "runtime-limit");
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->send(protocol::encode_frame(protocol::FrameType::List, "", 5)), 0);
    const auto in = c->next(Millis(10000));
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    const auto sessions = protocol::decode_sessions(in.frame.text());
    ASSERT_TRUE(sessions) << sessions.error;
    bool seen = false;
    for (const auto& s : *sessions.value) {
        if (s.id != id) continue;
        seen = true;
        ASSERT_TRUE(s.exit);
        EXPECT_EQ(s.exit->reason, protocol::ExitReason::Timeout);
    }
    EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace ptyvisor::itest
