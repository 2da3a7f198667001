#include "server/audit_log.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace ptyvisor::server {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/audit_log_test.XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string path;
};

std::vector<std::string> lines_of(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

AuditRecord start_record() {
    AuditRecord r;
    r.kind = AuditKind::Start;
    r.time_usec = 1764686144123456;  // 2025-12-02T14:35:44.123456Z
    r.session = "0123456789abcdef0123456789abcdef";
    r.argv = {"git", "push", "origin"};
    r.cwd = "/srv/a";
    r.env_names = {"LANG", "TOKEN"};
    r.peer_pid = 4242;
    r.peer_uid = 1000;
    r.unit = "agent.service";
    r.rule = "ptyvisord.toml:12";
    r.decision = "allow";
    return r;
}

TEST(AuditLog, JsonLineHasKindTimeSessionAndTheActsFields) {
    const auto j = nlohmann::json::parse(audit_json_line(start_record()));
    EXPECT_EQ(j["kind"], "start");
    EXPECT_EQ(j["time"], "2025-12-02T14:35:44.123456Z");
    EXPECT_EQ(j["time_usec"], 1764686144123456);
    EXPECT_EQ(j["session"], "0123456789abcdef0123456789abcdef");
    EXPECT_EQ(j["argv"], nlohmann::json({"git", "push", "origin"}));
    EXPECT_EQ(j["env_names"], nlohmann::json({"LANG", "TOKEN"}));
    EXPECT_EQ(j["peer_pid"], 4242);
    EXPECT_EQ(j["unit"], "agent.service");
    EXPECT_EQ(j["decision"], "allow");
    // What the act did not have is absent, not empty.
    EXPECT_FALSE(j.contains("text"));
    EXPECT_FALSE(j.contains("exit_status"));
}

TEST(AuditLog, RefusedStartHasANullSession) {
    AuditRecord r = start_record();
    r.session.clear();
    EXPECT_TRUE(nlohmann::json::parse(audit_json_line(r))["session"].is_null());
}

TEST(AuditLog, ArgvNewlineCannotForgeARecord) {
    AuditRecord r = start_record();
    r.argv = {"sh", "-c", "x\n{\"kind\":\"end\",\"session\":\"forged\"}"};
    const auto line = audit_json_line(r);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(line)["argv"][2], r.argv[2]);
    for (const auto& field : audit_journal_fields(r))
        if (field.starts_with("MESSAGE=")) {
            EXPECT_EQ(field.find('\n'), std::string::npos);
        }
}

TEST(AuditLog, HugeArgvIsCutWithAMarker) {
    AuditRecord r = start_record();
    r.argv = {"echo", std::string(100000, 'x')};
    auto argv = nlohmann::json::parse(audit_json_line(r))["argv"];
    ASSERT_EQ(argv.size(), 2u);
    const std::string second = argv[1];
    EXPECT_LE(second.size(), kMaxArgvBytes + 32);
    EXPECT_TRUE(second.ends_with("[+" + std::to_string(100000 - (kMaxArgvBytes - 4)) + " bytes]")) << second.substr(8000);

    r.argv.assign(100000, "w");
    argv = nlohmann::json::parse(audit_json_line(r))["argv"];
    ASSERT_EQ(argv.size(), kMaxArgvWords + 1);
    EXPECT_EQ(argv.back(), "[+" + std::to_string(100000 - kMaxArgvWords) + " words]");
}

TEST(AuditLog, CutNeverSplitsACharacterAndInvalidBytesAreReplaced) {
    AuditRecord r;
    r.kind = AuditKind::Send;
    r.session = "s";
    r.text = std::string(kMaxFieldBytes - 1, 'a') + "\xC3\xA9" + "tail" + "\xFF";
    const std::string text = nlohmann::json::parse(audit_json_line(r))["text"];
    EXPECT_TRUE(text.starts_with(std::string(kMaxFieldBytes - 1, 'a') + "[+"));
    r.text = "ok\xFF";
    EXPECT_EQ(nlohmann::json::parse(audit_json_line(r))["text"], "ok\xEF\xBF\xBD");
}

TEST(AuditLog, RedactReplacesEverySecretLongestFirst) {
    const std::vector<std::string> secrets{"abc", "abcdef", ""};
    EXPECT_EQ(redact("x abcdef y abc z", secrets), "x [secret] y [secret] z");
    EXPECT_EQ(redact("abcabc", secrets), "[secret][secret]");
    EXPECT_EQ(redact("nothing here", secrets), "nothing here");
    // A secret that is part of the marker does not eat the marker it made.
    const std::vector<std::string> short_one{"e", "secret-value"};
    EXPECT_EQ(redact("secret-value", short_one), "[secret]");
}

TEST(AuditLog, SecretInArgvAndSendTextNeverReachesTheFile) {
    TempDir dir;
    AuditLog log;
    std::string why;
    ASSERT_EQ(log.open({dir.path + "/no-journal-here", dir.path + "/state", "audit.jsonl", 1 << 20}, why), 0) << why;
    EXPECT_FALSE(log.to_journal());
    const std::vector<std::string> secrets{"hunter2-TOKEN"};
    AuditRecord start = start_record();
    start.argv = {"curl", "-H", "Authorization: Bearer hunter2-TOKEN", "https://x"};
    log.record(start, secrets);
    AuditRecord send;
    send.kind = AuditKind::Send;
    send.session = start.session;
    send.text = "export T=hunter2-TOKEN\r";
    log.record(send, secrets);
    EXPECT_EQ(log.written(), 2u);
    const auto lines = lines_of(dir.path + "/state/audit.jsonl");
    ASSERT_EQ(lines.size(), 2u);
    for (const auto& line : lines) EXPECT_EQ(line.find("hunter2"), std::string::npos) << line;
    EXPECT_EQ(nlohmann::json::parse(lines[1])["text"], "export T=[secret]\r");
    EXPECT_EQ(nlohmann::json::parse(lines[1])["bytes"], send.text.size());
}

TEST(AuditLog, MessageIdsAreFixedDistinctAndWellFormed) {
    std::set<std::string> ids;
    for (const auto kind : kAuditKinds) {
        const std::string id = audit_message_id(kind);
        EXPECT_EQ(id.size(), 32u);
        EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
        ids.insert(id);
        EXPECT_EQ(parse_audit_kind(to_string(kind)), kind);
    }
    EXPECT_EQ(ids.size(), std::size(kAuditKinds));
    EXPECT_STREQ(audit_message_id(AuditKind::Start), "35dae11fa1464e189759657cc5a8a849");
}

TEST(AuditLog, JournalFieldsAreStructured) {
    const auto fields = audit_journal_fields(start_record());
    std::map<std::string, std::string> f;
    for (const auto& field : fields) f[field.substr(0, field.find('='))] = field.substr(field.find('=') + 1);
    EXPECT_EQ(f["MESSAGE_ID"], "35dae11fa1464e189759657cc5a8a849");
    EXPECT_EQ(f["SYSLOG_IDENTIFIER"], "ptyvisord");
    EXPECT_EQ(f["PTYVISOR_KIND"], "start");
    EXPECT_EQ(f["PTYVISOR_SESSION"], "0123456789abcdef0123456789abcdef");
    EXPECT_EQ(f["PTYVISOR_TIME_USEC"], "1764686144123456");
    EXPECT_EQ(f["PTYVISOR_ARGV"], R"(["git","push","origin"])");
    EXPECT_EQ(f["PTYVISOR_ENV_NAMES"], R"(["LANG","TOKEN"])");
    EXPECT_EQ(f["PTYVISOR_PEER_PID"], "4242");
    EXPECT_EQ(f["MESSAGE"], "ptyvisor start 0123456789abcdef0123456789abcdef: git push origin decision=allow");
    // Every PTYVISOR_ field is one the table knows, so a reader can type it back.
    for (const auto& [key, value] : f) {
        if (!key.starts_with("PTYVISOR_") || key == "PTYVISOR_KIND" || key == "PTYVISOR_SESSION" ||
            key == "PTYVISOR_TIME_USEC")
            continue;
        bool known = false;
        for (const auto& info : audit_field_table()) {
            std::string upper = info.name;
            for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            known = known || key == "PTYVISOR_" + upper;
        }
        EXPECT_TRUE(known) << key;
    }
}

TEST(AuditLog, JournalDatagramUsesTheBinaryFormForNewlines) {
    const std::vector<std::string> fields{"A=one", "B=two\nlines"};
    const std::string expected = std::string("A=one\nB\n") + std::string("\x09\0\0\0\0\0\0\0", 8) + "two\nlines\n";
    EXPECT_EQ(journal_datagram(fields), expected);
}

// A datagram socket standing in for journald's.
struct FakeJournal {
    explicit FakeJournal(std::string socket_path) : path(std::move(socket_path)) {
        fd = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    }
    std::string receive() {
        std::string buf(256 * 1024, '\0');
        const auto n = ::recv(fd.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        buf.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        return buf;
    }
    std::string path;
    UniqueFd fd;
};

TEST(AuditLog, JournalSinkSendsOneDatagramPerRecord) {
    TempDir dir;
    FakeJournal journal(dir.path + "/socket");
    JournalSink sink;
    ASSERT_EQ(sink.open(journal.path), 0);
    AuditRecord r = start_record();
    r.argv.push_back("multi\nline");
    ASSERT_EQ(sink.write(r), 0);
    const auto fields = audit_journal_fields(r);
    EXPECT_EQ(journal.receive(), journal_datagram(fields));
}

TEST(AuditLog, StalledJournalDropsInsteadOfBlocking) {
    // journald that never reads: the sink must count drops, never wait (the test would hang).
    TempDir dir;
    FakeJournal journal(dir.path + "/socket");
    JournalSink sink;
    ASSERT_EQ(sink.open(journal.path), 0);
    AuditRecord r = start_record();
    r.argv = {"echo", std::string(4000, 'x')};
    int sent = 0;
    for (int i = 0; i < 100000 && sink.dropped() < 10; ++i)
        if (sink.write(r) == 0) ++sent;
    EXPECT_GE(sink.dropped(), 10u);
    EXPECT_GT(sent, 0);
    // Once journald reads again, records flow again.
    while (!journal.receive().empty()) {
    }
    EXPECT_EQ(sink.write(r), 0);
}

TEST(AuditLog, JournalRestartIsFollowed) {
    TempDir dir;
    JournalSink sink;
    {
        FakeJournal first(dir.path + "/socket");
        ASSERT_EQ(sink.open(first.path), 0);
        ASSERT_EQ(sink.write(start_record()), 0);
        ::unlink(first.path.c_str());
    }
    FakeJournal second(dir.path + "/socket");
    ASSERT_EQ(sink.write(start_record()), 0);
    EXPECT_NE(second.receive().find("PTYVISOR_KIND=start\n"), std::string::npos);
}

TEST(AuditLog, FileSinkWritesPrivateJsonLinesAndRotatesOnce) {
    TempDir dir;
    FileSink sink;
    ASSERT_EQ(sink.open(dir.path + "/state", "audit.jsonl", 4096), 0);
    struct stat st {};
    ASSERT_EQ(::stat((dir.path + "/state/audit.jsonl").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((dir.path + "/state").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    for (int i = 0; i < 100; ++i) {
        AuditRecord r = start_record();
        r.kind = AuditKind::End;
        r.exit_status = i;
        ASSERT_EQ(sink.write(r), 0);
    }
    const auto current = lines_of(dir.path + "/state/audit.jsonl");
    const auto previous = lines_of(dir.path + "/state/audit.jsonl.1");
    EXPECT_FALSE(previous.empty());
    EXPECT_FALSE(fs::exists(dir.path + "/state/audit.jsonl.2"));
    EXPECT_LE(fs::file_size(dir.path + "/state/audit.jsonl"), 4096u);
    EXPECT_LE(fs::file_size(dir.path + "/state/audit.jsonl.1"), 4096u);
    // The newest records, in order, across the two files.
    std::vector<std::string> all = previous;
    all.insert(all.end(), current.begin(), current.end());
    for (std::size_t i = 1; i < all.size(); ++i)
        EXPECT_EQ(nlohmann::json::parse(all[i])["exit_status"].get<int>(),
                  nlohmann::json::parse(all[i - 1])["exit_status"].get<int>() + 1);
    EXPECT_EQ(nlohmann::json::parse(all.back())["exit_status"], 99);
}

TEST(AuditLog, FileSinkAppendsToAnExistingFile) {
    TempDir dir;
    {
        FileSink sink;
        ASSERT_EQ(sink.open(dir.path, "audit.jsonl"), 0);
        ASSERT_EQ(sink.write(start_record()), 0);
    }
    FileSink sink;
    ASSERT_EQ(sink.open(dir.path, "audit.jsonl"), 0);
    EXPECT_GT(sink.size(), 0u);
    ASSERT_EQ(sink.write(start_record()), 0);
    EXPECT_EQ(lines_of(dir.path + "/audit.jsonl").size(), 2u);
}

TEST(AuditLog, SymlinkedAuditFileIsRefused) {
    TempDir dir;
    const auto target = dir.path + "/elsewhere";
    { std::ofstream(target) << "root's file\n"; }
    ASSERT_EQ(::symlink(target.c_str(), (dir.path + "/audit.jsonl").c_str()), 0);
    FileSink sink;
    EXPECT_EQ(sink.open(dir.path, "audit.jsonl"), -ELOOP);
    EXPECT_EQ(lines_of(target).size(), 1u);
}

TEST(AuditLog, HardLinkedAuditFileIsRefused) {
    TempDir dir;
    const auto target = dir.path + "/shadow";
    { std::ofstream(target) << "x\n"; }
    ::chmod(target.c_str(), 0600);
    ASSERT_EQ(::link(target.c_str(), (dir.path + "/audit.jsonl").c_str()), 0);
    FileSink sink;
    EXPECT_EQ(sink.open(dir.path, "audit.jsonl"), -EPERM);
}

TEST(AuditLog, ReadableAuditFileIsRefused) {
    TempDir dir;
    const auto path = dir.path + "/audit.jsonl";
    { std::ofstream(path) << ""; }
    ::chmod(path.c_str(), 0644);
    FileSink sink;
    EXPECT_EQ(sink.open(dir.path, "audit.jsonl"), -EPERM);
}

TEST(AuditLog, FifoAuditFileFailsWithoutHanging) {
    TempDir dir;
    ASSERT_EQ(::mkfifo((dir.path + "/audit.jsonl").c_str(), 0600), 0);
    FileSink sink;
    EXPECT_LT(sink.open(dir.path, "audit.jsonl"), 0);
}

TEST(AuditLog, GroupWritableDirectoryIsRefused) {
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path.c_str(), 0770), 0);
    FileSink sink;
    EXPECT_EQ(sink.open(dir.path, "audit.jsonl"), -EPERM);
    AuditLog log;
    std::string why;
    EXPECT_LT(log.open({dir.path + "/no-journal", dir.path, "audit.jsonl", 1 << 20}, why), 0);
    EXPECT_NE(why.find(dir.path), std::string::npos) << why;
}

TEST(AuditLog, JournalIsPreferredWhenItListens) {
    TempDir dir;
    FakeJournal journal(dir.path + "/socket");
    AuditLog log;
    std::string why;
    ASSERT_EQ(log.open({journal.path, dir.path + "/state", "audit.jsonl", 1 << 20}, why), 0) << why;
    EXPECT_TRUE(log.to_journal());
    log.record(start_record());
    EXPECT_EQ(log.written(), 1u);
    EXPECT_NE(journal.receive().find("PTYVISOR_KIND=start\n"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir.path + "/state/audit.jsonl"));
}

}  // namespace
}  // namespace ptyvisor::server
