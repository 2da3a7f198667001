#include "web/messages.h"

#include <gtest/gtest.h>

namespace ptyvisor::web {
namespace {

using nlohmann::json;

std::string namer(std::int64_t uid) { return uid == 1000 ? "alice" : std::to_string(uid); }

SessionRow running_row() {
    SessionRow r;
    r.id = "0123456789abcdef0123456789abcdef";
    r.argv = {"bash", "-i"};
    r.cwd = "/home/agent";
    r.created = 1700000000;
    r.clients = 2;
    r.detached = true;
    r.start = 10;
    r.offset = 99;
    return r;
}

TEST(SessionJson, EveryMemberOfTheContract) {
    auto r = running_row();
    r.shell = "bash";
    r.at_prompt = true;
    r.last_command = LastCommand{3, "make", 2, false};
    const auto j = session_json(r, namer);
    for (const char* key : {"id", "argv", "cwd", "state", "exit", "created", "clients", "detached", "start", "offset",
                            "controller", "controller_user", "controller_since", "waiting_for_input", "at_prompt",
                            "shell", "last_command", "recording"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j.size(), 18u);
    EXPECT_EQ(j["state"], "running");
    EXPECT_TRUE(j["exit"].is_null());
    EXPECT_EQ(j["argv"], json::array({"bash", "-i"}));
    EXPECT_EQ(j["controller"], "agent");
    EXPECT_TRUE(j["controller_user"].is_null());
    EXPECT_TRUE(j["controller_since"].is_null());
    EXPECT_EQ(j["shell"], "bash");
    EXPECT_EQ(j["last_command"], (json{{"seq", 3}, {"command", "make"}, {"exit_code", 2}, {"running", false}}));
    EXPECT_EQ(j["recording"], false);
}

TEST(SessionJson, AHeldTerminalNamesItsSupervisor) {
    auto r = running_row();
    r.controller = {true, 1000, 1700000000123};
    auto j = session_json(r, namer);
    EXPECT_EQ(j["controller"], "supervisor");
    EXPECT_EQ(j["controller_user"], "alice");
    EXPECT_EQ(j["controller_since"], 1700000000123);
    r.controller = {true, 4242, 5};
    j = session_json(r, namer);
    EXPECT_EQ(j["controller_user"], "4242");  // no name: the uid as text
}

TEST(SessionJson, AnExitedSessionHasNoController) {
    auto r = running_row();
    r.state = protocol::State::Exited;
    r.exit = protocol::ExitStatus{};
    r.exit->kind = protocol::ExitStatus::Kind::Exited;
    r.exit->code = 3;
    r.controller = {true, 1000, 1};
    r.last_command = LastCommand{1, "sleep 1", std::nullopt, true};
    const auto j = session_json(r, namer);
    EXPECT_EQ(j["state"], "exited");
    EXPECT_TRUE(j["exit"].is_object());
    EXPECT_EQ(j["exit"]["code"], 3);
    EXPECT_TRUE(j["controller"].is_null());
    EXPECT_TRUE(j["controller_user"].is_null());
    EXPECT_TRUE(j["last_command"]["exit_code"].is_null());
    EXPECT_EQ(j["last_command"]["running"], true);
}

TEST(SessionJson, DocumentsCarryTheRoleAndSurviveInvalidUtf8) {
    auto r = running_row();
    r.argv = {"printf", std::string("\xff\xfe")};
    const auto doc = json::parse(sessions_document({r}, "supervisor", namer, "sessions"));
    EXPECT_EQ(doc["type"], "sessions");
    EXPECT_EQ(doc["role"], "supervisor");
    ASSERT_EQ(doc["sessions"].size(), 1u);
    EXPECT_EQ(doc["sessions"][0]["argv"][1], "\xef\xbf\xbd\xef\xbf\xbd");
    const auto api = json::parse(sessions_document({}, "observer", namer));
    EXPECT_FALSE(api.contains("type"));
    EXPECT_EQ(api["sessions"], json::array());
}

TEST(SessionJson, RowFromTheProtocol) {
    protocol::SessionInfo info;
    info.id = "0123456789abcdef0123456789abcdef";
    info.argv = {"vim"};
    info.state = protocol::State::Starting;
    info.offset = 7;
    info.last_command = protocol::CommandRecord{};
    info.last_command->seq = 4;
    info.last_command->command = "ls";
    info.held = true;
    info.controller_uid = 1000;
    info.controller_since = 123;
    info.recording = true;
    const auto r = row_from(info);
    EXPECT_EQ(r.id, info.id);
    EXPECT_TRUE(r.controller.held);
    EXPECT_EQ(r.controller.uid, 1000);
    EXPECT_EQ(r.controller.since_ms, 123);
    EXPECT_TRUE(r.recording);
    EXPECT_EQ(session_json(r, namer)["controller_user"], "alice");
    EXPECT_EQ(r.state, protocol::State::Starting);
    EXPECT_EQ(r.offset, 7u);
    ASSERT_TRUE(r.last_command);
    EXPECT_TRUE(r.last_command->running);  // no D mark yet
    EXPECT_EQ(session_json(r, namer)["state"], "starting");
}

TEST(SessionJson, UnavailableSaysWhy) {
    EXPECT_EQ(json::parse(unavailable_message("cannot connect")),
              (json{{"type", "unavailable"}, {"message", "cannot connect"}}));
}

TEST(InfoJson, MayControlFollowsTheRole) {
    auto j = json::parse(info_document("alice", 1000, "supervisor", "ptyvisor 0.1.0"));
    EXPECT_EQ(j, (json{{"user", "alice"}, {"uid", 1000}, {"role", "supervisor"}, {"may_control", true},
                       {"version", "ptyvisor 0.1.0"}}));
    EXPECT_TRUE(json::parse(info_document("root", 0, "root", "v"))["may_control"]);
    EXPECT_FALSE(json::parse(info_document("bob", 1001, "observer", "v"))["may_control"]);
    EXPECT_FALSE(json::parse(info_document("agent", 1002, "agent", "v"))["may_control"]);
}

TEST(TerminalMessages, ServerToPage) {
    AttachedView v;
    v.id = "0123456789abcdef0123456789abcdef";
    v.offset = 5;
    v.cols = 120;
    v.rows = 40;
    v.may_control = true;
    auto j = json::parse(attached_message(v, false, namer));
    EXPECT_EQ(j["type"], "attached");
    EXPECT_EQ(j["size"], (json{{"cols", 120}, {"rows", 40}}));
    EXPECT_EQ(j["state"], "running");
    EXPECT_EQ(j["may_control"], true);
    EXPECT_EQ(j["controller"], "agent");
    EXPECT_EQ(j["you"], false);

    j = json::parse(controller_message({true, 1000, 77}, true, namer));
    EXPECT_EQ(j, (json{{"type", "controller"}, {"controller", "supervisor"}, {"controller_user", "alice"},
                       {"since", 77}, {"you", true}}));
    EXPECT_EQ(json::parse(dropped_message(10, 3)), (json{{"type", "dropped"}, {"offset", 10}, {"lost", 3}}));
    EXPECT_EQ(json::parse(refused_message("read_only", "m")),
              (json{{"type", "refused"}, {"code", "read_only"}, {"message", "m"}}));
    EXPECT_EQ(json::parse(error_message("x", "y")), (json{{"type", "error"}, {"code", "x"}, {"message", "y"}}));
    protocol::ExitStatus status;
    status.kind = protocol::ExitStatus::Kind::Exited;
    j = json::parse(exit_message(status));
    EXPECT_EQ(j["type"], "exit");
    EXPECT_EQ(j["exit"]["code"], 0);
}

TEST(TerminalMessages, ScreenOfAFlood) {
    ScreenView v;
    v.offset = 5000;
    v.cols = 80;
    v.rows = 24;
    v.data = "a\x1b[1;1H";
    v.streaming = true;
    v.skipped = 4000;
    EXPECT_EQ(json::parse(screen_message(v)),
              (json{{"type", "screen"}, {"offset", 5000}, {"size", {{"cols", 80}, {"rows", 24}}},
                    {"data", "a\x1b[1;1H"}, {"streaming", true}, {"skipped", 4000}}));
}

TEST(TerminalMessages, PageToServer) {
    auto m = parse_page_message(R"({"type":"input","data":"ls\r"})");
    ASSERT_TRUE(std::holds_alternative<InputMessage>(m));
    EXPECT_EQ(std::get<InputMessage>(m).data, "ls\r");
    EXPECT_TRUE(std::holds_alternative<TakeMessage>(parse_page_message(R"({"type":"take"})")));
    EXPECT_TRUE(std::holds_alternative<ReleaseMessage>(parse_page_message(R"({"type":"release"})")));
    m = parse_page_message(R"({"type":"resize","cols":100,"rows":30})");
    ASSERT_TRUE(std::holds_alternative<ResizeMessage>(m));
    EXPECT_EQ(std::get<ResizeMessage>(m).cols, 100);
    EXPECT_EQ(std::get<ResizeMessage>(m).rows, 30);
}

TEST(TerminalMessages, PageMessagesAreCheckedNotTrusted) {
    for (const char* bad : {"", "nope", "[]", "42", R"({"data":"x"})", R"({"type":1})", R"({"type":"input"})",
                            R"({"type":"input","data":5})", R"({"type":"resize","cols":0,"rows":10})",
                            R"({"type":"resize","cols":1001,"rows":10})", R"({"type":"resize","cols":-1,"rows":10})",
                            R"({"type":"resize","cols":10.5,"rows":10})", R"({"type":"resize","cols":"80","rows":24})",
                            R"({"type":"resize","cols":80})", R"({"type":"exec"})"})
        EXPECT_TRUE(std::holds_alternative<InvalidMessage>(parse_page_message(bad))) << bad;
    EXPECT_TRUE(std::holds_alternative<ResizeMessage>(parse_page_message(R"({"type":"resize","cols":1000,"rows":1})")));
    // Nesting past depth 2 is dropped while parsing, not built: what is left is a plain input.
    const auto deep = parse_page_message(R"({"type":"input","data":"x","deep":)" + std::string(10000, '[') +
                                         std::string(10000, ']') + "}");
    ASSERT_TRUE(std::holds_alternative<InputMessage>(deep));
    EXPECT_EQ(std::get<InputMessage>(deep).data, "x");
}

}  // namespace
}  // namespace ptyvisor::web
