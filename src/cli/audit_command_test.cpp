#include "cli/audit_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "server/audit_log.h"

namespace ptyvisor::cli {
namespace {

namespace fs = std::filesystem;
using server::AuditKind;
using server::AuditRecord;

constexpr std::int64_t kSecond = 1000000;
constexpr std::int64_t kT0 = 1764686144000000;  // 2025-12-02T14:35:44Z
const std::string kA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/audit_command_test.XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string path;
};

std::int64_t since(std::string_view text, std::int64_t now = kT0) {
    std::int64_t out = 0;
    std::string why;
    EXPECT_TRUE(parse_since(text, now, out, why)) << why;
    return out;
}

TEST(AuditCommand, SinceTakesIso8601) {
    EXPECT_EQ(since("2025-12-02T14:35:44Z"), kT0);
    EXPECT_EQ(since("2025-12-02T14:35:44.5Z"), kT0 + kSecond / 2);
    EXPECT_EQ(since("2025-12-02T14:35:44.000001Z"), kT0 + 1);
    EXPECT_EQ(since("2025-12-02T15:35:44+01:00"), kT0);
    EXPECT_EQ(since("2025-12-02T13:35:44-01:00"), kT0);
    EXPECT_EQ(since("2025-12-02 14:35Z"), kT0 - 44 * kSecond);
    EXPECT_EQ(since("2025-12-02T00:00Z"), kT0 - (14 * 3600 + 35 * 60 + 44) * kSecond);
    EXPECT_EQ(since("@1764686144"), kT0);
}

TEST(AuditCommand, SinceWithoutAZoneIsLocalTime) {
    ::setenv("TZ", "Europe/Paris", 1);  // UTC+1 in December
    ::tzset();
    EXPECT_EQ(since("2025-12-02T15:35:44"), kT0);
    ::setenv("TZ", "UTC", 1);
    ::tzset();
    EXPECT_EQ(since("2025-12-02T14:35:44"), kT0);
}

TEST(AuditCommand, SinceTakesRelativeTimes) {
    EXPECT_EQ(since("-10min"), kT0 - 600 * kSecond);
    EXPECT_EQ(since("-30s"), kT0 - 30 * kSecond);
    EXPECT_EQ(since("-2h"), kT0 - 7200 * kSecond);
    EXPECT_EQ(since("-1d"), kT0 - 86400 * kSecond);
    EXPECT_EQ(since("-1 week"), kT0 - 7 * 86400 * kSecond);
    EXPECT_EQ(since("now"), kT0);
}

TEST(AuditCommand, SinceRefusesWhatItCannotRead) {
    for (const char* bad : {"", "-", "-10", "-10parsecs", "yesterday", "2025-13-02", "2025-12-02T25:00",
                            "2025-12-02T14:35:44+1", "-99999999999999999999d", "--10min", "@-5", "2025/12/02"}) {
        std::int64_t out = 0;
        std::string why;
        EXPECT_FALSE(parse_since(bad, kT0, out, why)) << bad;
        EXPECT_NE(why.find("--since"), std::string::npos);
    }
}

// A session's acts as the daemon's sink writes them: B's in between A's.
std::string write_scripted_session(const std::string& dir, std::uint64_t max_bytes = 1 << 20) {
    server::FileSink sink;
    EXPECT_EQ(sink.open(dir, "audit.jsonl", max_bytes), 0);
    const std::vector<std::string> secrets{"s3cr3t"};
    std::int64_t t = kT0;
    const auto write = [&](AuditRecord r) {
        r.time_usec = t;
        t += kSecond;
        r.argv = [&] {
            std::vector<std::string> out;
            for (const auto& w : r.argv) out.push_back(server::redact(w, secrets));
            return out;
        }();
        r.text = server::redact(r.text, secrets);
        EXPECT_EQ(sink.write(r), 0);
    };
    const auto rec = [](AuditKind kind, const std::string& session, auto&& set) {
        AuditRecord r;
        r.kind = kind;
        r.session = session;
        set(r);
        return r;
    };
    write(rec(AuditKind::Start, kA, [](AuditRecord& r) {
        r.argv = {"bash"};
        r.env_names = {"API_KEY"};
        r.peer_pid = 10;
        r.decision = "allow";
    }));
    write(rec(AuditKind::Start, kB, [](AuditRecord& r) {
        r.argv = {"make", "test"};
        r.decision = "allow";
    }));
    write(rec(AuditKind::Send, kA, [](AuditRecord& r) { r.text = "echo s3cr3t\r"; }));
    write(rec(AuditKind::Takeover, kA, [](AuditRecord& r) { r.peer_uid = 1001; }));
    write(rec(AuditKind::Kill, kA, [](AuditRecord& r) { r.signal = 15; }));
    write(rec(AuditKind::End, kA, [](AuditRecord& r) { r.signal = 15; }));
    write(rec(AuditKind::End, kB, [](AuditRecord& r) { r.exit_status = 0; }));
    return dir + "/audit.jsonl";
}

std::vector<nlohmann::ordered_json> read(const std::string& path, const AuditFilter& filter,
                                         std::uint64_t* malformed_out = nullptr) {
    std::vector<nlohmann::ordered_json> out;
    std::uint64_t malformed = 0;
    std::string why;
    EXPECT_TRUE(read_audit_file(path, filter, [&](const auto& r) { out.push_back(r); }, malformed, why)) << why;
    if (malformed_out) *malformed_out = malformed;
    return out;
}

std::vector<std::string> kinds(const std::vector<nlohmann::ordered_json>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r["kind"]);
    return out;
}

TEST(AuditCommand, ReadsTheSinksFileInOrderAndFiltersBySession) {
    TempDir dir;
    const auto path = write_scripted_session(dir.path);
    const auto all = read(path, {});
    EXPECT_EQ(kinds(all), (std::vector<std::string>{"start", "start", "send", "takeover", "kill", "end", "end"}));
    const auto a = read(path, {kA, std::nullopt});
    EXPECT_EQ(kinds(a), (std::vector<std::string>{"start", "send", "takeover", "kill", "end"}));
    EXPECT_EQ(a[0]["argv"], nlohmann::json({"bash"}));
    EXPECT_EQ(a[0]["env_names"], nlohmann::json({"API_KEY"}));
    EXPECT_EQ(a[1]["text"], "echo [secret]\r");
    EXPECT_EQ(a[3]["signal"], 15);
    for (const auto& r : all) EXPECT_EQ(r.dump().find("s3cr3t"), std::string::npos);
}

TEST(AuditCommand, FiltersBySince) {
    TempDir dir;
    const auto path = write_scripted_session(dir.path);
    EXPECT_EQ(kinds(read(path, {std::nullopt, kT0 + 4 * kSecond})), (std::vector<std::string>{"kill", "end", "end"}));
    EXPECT_EQ(kinds(read(path, {kB, kT0 + 2 * kSecond})), (std::vector<std::string>{"end"}));
}

TEST(AuditCommand, ReadsTheRotatedHalfFirst) {
    TempDir dir;
    // Small enough that the seven records span both files.
    const auto path = write_scripted_session(dir.path, 600);
    ASSERT_TRUE(fs::exists(path + ".1"));
    const auto all = read(path, {});
    ASSERT_GE(all.size(), 2u);
    for (std::size_t i = 1; i < all.size(); ++i)
        EXPECT_GT(all[i]["time_usec"].get<std::int64_t>(), all[i - 1]["time_usec"].get<std::int64_t>());
    EXPECT_EQ(all.back()["kind"], "end");
}

TEST(AuditCommand, ForgedOrBrokenLinesAreSkippedAndCounted) {
    TempDir dir;
    const auto path = write_scripted_session(dir.path);
    { std::ofstream(path, std::ios::app) << "not json\n[1,2]\n{\"no_kind\":1}\n{\"kind\":\"end\",\"sess"; }
    std::uint64_t malformed = 0;
    const auto all = read(path, {}, &malformed);
    EXPECT_EQ(all.size(), 7u);
    EXPECT_EQ(malformed, 4u);
}

TEST(AuditCommand, MissingFileSaysSo) {
    std::uint64_t malformed = 0;
    std::string why;
    EXPECT_FALSE(read_audit_file("/nonexistent/audit.jsonl", {}, [](const auto&) {}, malformed, why));
    EXPECT_NE(why.find("/nonexistent/audit.jsonl: No such file"), std::string::npos) << why;
}

TEST(AuditCommand, JournalEntryBecomesTheFilesRecord) {
    // What the journal sink sends, read back by field as sd-journal hands fields over, must
    // give the object the file sink writes.
    AuditRecord r;
    r.kind = AuditKind::Start;
    r.time_usec = kT0;
    r.session = kA;
    r.argv = {"git", "push", "a b"};
    r.cwd = "/srv";
    r.env_names = {"X"};
    r.peer_pid = 7;
    r.peer_uid = 1000;
    r.unit = "agent.service";
    r.rule = "p.toml:3";
    r.decision = "deny";
    r.reason = "no";
    std::map<std::string, std::string> fields;
    for (const auto& f : server::audit_journal_fields(r))
        if (f.starts_with("PTYVISOR_")) fields[f.substr(0, f.find('='))] = f.substr(f.find('=') + 1);
    EXPECT_EQ(audit_record_from_journal(fields), nlohmann::ordered_json::parse(server::audit_json_line(r)));
    r.session.clear();
    fields.erase("PTYVISOR_SESSION");
    EXPECT_TRUE(audit_record_from_journal(fields)["session"].is_null());
}

TEST(AuditCommand, TerminalEscapesInRecordsAreNotPrinted) {
    // An agent SENDs an escape sequence that would retitle or rewrite a supervisor's terminal.
    nlohmann::ordered_json r{{"kind", "send"}, {"time", "2025-12-02T14:35:44.000000Z"}, {"session", kA},
                             {"text", "\x1b]0;owned\x07\x1b[2J\r\xc2\x9b" "31m\x7f"}};
    const auto table = format_audit_table({r});
    EXPECT_EQ(table.find('\x1b'), std::string::npos);
    EXPECT_EQ(table.find('\x07'), std::string::npos);
    EXPECT_EQ(table.find("\xc2\x9b"), std::string::npos);
    EXPECT_NE(table.find("text=\\e]0;owned\\x07\\e[2J\\r\\u009b31m\\x7f"), std::string::npos) << table;
    EXPECT_EQ(printable("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \\xff");
}

TEST(AuditCommand, TableShowsOneRowPerRecord) {
    TempDir dir;
    const auto table = format_audit_table(read(write_scripted_session(dir.path), {kB, std::nullopt}));
    EXPECT_EQ(table,
              "TIME                 KIND   SESSION                           DETAILS\n"
              "2025-12-02 14:35:45  start  " + kB + "  make test  decision=allow\n"
              "2025-12-02 14:35:50  end    " + kB + "  exit_status=0\n");
}

// The real executable, as a supervisor runs it.
std::string run_cli(const std::vector<std::string>& args, int& status) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], 1);
        ::close(out[0]);
        std::vector<char*> argv{const_cast<char*>(PTYVISOR_CLI_PATH)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    ::close(out[0]);
    ::waitpid(pid, &status, 0);
    return text;
}

TEST(AuditCommand, CliPrintsJsonLinesOfTheSessionsActs) {
    TempDir dir;
    const auto path = write_scripted_session(dir.path);
    int status = -1;
    const auto out = run_cli({"audit", "--json", "--file", path, "--session", kA, "--since", "2025-12-02T14:35:46Z"}, status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::vector<std::string> got;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line);
        EXPECT_EQ(j["session"], kA);
        EXPECT_TRUE(j.contains("time"));
        got.push_back(j["kind"]);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"send", "takeover", "kill", "end"}));
}

TEST(AuditCommand, CliRefusesABadSince) {
    int status = -1;
    run_cli({"audit", "--file", "/nonexistent", "--since", "last tuesday"}, status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 255);
}

}  // namespace
}  // namespace ptyvisor::cli
