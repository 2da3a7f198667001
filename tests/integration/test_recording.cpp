// Session recordings ([recording] directory): every session's output in an asciicast v2 file
// that only root can touch, readable by asciinema itself, bounded in size and in age, and in
// a directory the daemon refuses to use when anyone else could tamper with it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "protocol/control_payloads.h"
#include "support/fixture.h"

namespace ptyvisor::itest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr Millis kExit{30000};

// UTF-8 of two, three and four bytes, then enough lines for many reads of the terminal.
const std::string kScript =
    "printf 'term=%s\\n' \"$TERM\"; read x; stty size; "
    "printf 'h\\303\\251llo w\\303\\266rld \\342\\202\\254 \\360\\237\\230\\200\\n'; seq 1 3000; exit 3";

struct Cast {
    json header;
    std::vector<json> events;
    std::string output;  // the "o" events' text, concatenated
    std::string problem;  // why the file is not a valid asciicast v2, or empty
};

Cast read_cast(const std::string& path) {
    Cast cast;
    std::ifstream in(path, std::ios::binary);
    std::string line;
    if (!std::getline(in, line)) {
        cast.problem = "no header line in " + path;
        return cast;
    }
    cast.header = json::parse(line, nullptr, false);
    if (cast.header.is_discarded() || !cast.header.is_object()) cast.problem = "header is not a JSON object: " + line;
    double last = 0;
    for (int number = 2; std::getline(in, line); ++number) {
        auto e = json::parse(line, nullptr, false);
        if (e.is_discarded() || !e.is_array() || e.size() != 3 || !e[0].is_number() || !e[1].is_string() ||
            !e[2].is_string()) {
            cast.problem = "line " + std::to_string(number) + " is not an event: " + line.substr(0, 200);
            return cast;
        }
        if (e[0].get<double>() < last) cast.problem = "line " + std::to_string(number) + " goes back in time";
        last = e[0].get<double>();
        if (e[1] == "o") cast.output += e[2].get<std::string>();
        cast.events.push_back(std::move(e));
    }
    return cast;
}

// Whether `account` can open `path` with `flags`: asked of the kernel, as the account.
bool account_can_open(const Account& account, const std::string& path, int flags) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const gid_t groups[] = {account.gid};
        if (!drop_privileges(account.uid, account.gid, groups)) ::_exit(2);
        ::_exit(::open(path.c_str(), flags | O_CLOEXEC) >= 0 ? 0 : 1);
    }
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

class Recording : public EndToEnd {
protected:
    void SetUp() override {
        EndToEnd::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        recordings_ = *dir_ / "recordings";
    }

    [[nodiscard]] DaemonConfig recording_config() const {
        DaemonConfig c = config();
        c.recording_directory = recordings_;
        return c;
    }

    // Runs kScript through a raw client (size 100x30, resized to 132x40 before its input)
    // and returns the session id; the session's whole output is in `output`.
    std::string run_session(std::string& output) {
        auto client = connect_as_account();
        if (!client) return {};
        const UniqueFd cwd = open_work_dir();
        auto request = RawClient::start_request({"sh", "-c", kScript}, session_env(), cwd.get());
        request.term = "xterm-256color";
        request.size = {30, 100};
        EXPECT_EQ(client->send_start(request, {cwd.get()}), 0);
        std::string seen;
        const auto started = client->expect_started(Millis(20000), &seen);
        if (!started) {
            ADD_FAILURE() << "expected STARTED, got: " << seen;
            return {};
        }
        EXPECT_TRUE(client->read_output_until("term=", kExit, &seen)) << seen;
        EXPECT_EQ(client->send_frame(protocol::FrameType::Resize, protocol::encode(protocol::WindowSize{40, 132})), 0);
        EXPECT_EQ(client->send_frame(protocol::FrameType::Input, "go\n"), 0);
        const auto exit = client->read_until_exit(kExit, &seen);
        EXPECT_TRUE(exit) << seen;
        if (exit) {
            EXPECT_EQ(exit->shell_status(), 3);
        }
        output = client->output();
        return started->id;
    }

    std::string recordings_;
};

TEST_F(Recording, TheSessionIsRecordedAsAnAsciicastOnlyRootCanTouch) {
    ASSERT_NE(start_daemon(recording_config()), nullptr);
    std::string output;
    const std::string id = run_session(output);
    ASSERT_EQ(id.size(), 32u) << id;
    ASSERT_NE(output.find("40 132"), std::string::npos) << "the resize did not reach the session: " << output;

    const std::string path = recordings_ + "/" + id + ".cast";
    const Cast cast = read_cast(path);
    ASSERT_EQ(cast.problem, "");
    EXPECT_EQ(cast.header["version"], 2);
    EXPECT_EQ(cast.header["width"], 100);
    EXPECT_EQ(cast.header["height"], 30);
    EXPECT_EQ(cast.header["command"], "sh -c " + kScript);
    EXPECT_EQ(cast.header["env"]["TERM"], "xterm-256color");
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    EXPECT_LE(cast.header["timestamp"].get<std::int64_t>(), now);
    EXPECT_GT(cast.header["timestamp"].get<std::int64_t>(), now - 600);
    EXPECT_NE(output.find("term=xterm-256color"), std::string::npos) << output.substr(0, 200);

    // Byte for byte what the session wrote (valid UTF-8 throughout).
    EXPECT_EQ(cast.output.size(), output.size());
    EXPECT_TRUE(cast.output == output) << "the recording differs from the session's output";
    std::size_t resizes = 0;
    for (const auto& e : cast.events) {
        if (e[1] != "r") continue;
        ++resizes;
        EXPECT_EQ(e[2], "132x40");
    }
    EXPECT_EQ(resizes, 1u);
    RecordProperty("events", static_cast<int>(cast.events.size()));

    struct stat st{};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_nlink, 1u);
    ASSERT_EQ(::lstat(recordings_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_FALSE(account_can_open(*account_, path, O_RDONLY));
    EXPECT_FALSE(account_can_open(*account_, path, O_WRONLY | O_APPEND));
    EXPECT_FALSE(account_can_open(*account_, recordings_, O_RDONLY | O_DIRECTORY));
    EXPECT_FALSE(account_can_open(*account_, recordings_ + "/planted.cast", O_WRONLY | O_CREAT));
}

// `asciinema cat` prints the "o" events; it needs a controlling terminal (it puts /dev/tty in
// raw mode), so it gets a PTY of its own. Its stdout is a pipe, its stderr a file in `home`.
std::optional<std::string> asciinema_cat(const std::string& file, const std::string& home, std::string& error) {
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
        error = std::string("cannot allocate a PTY: ") + std::strerror(errno);
        return std::nullopt;
    }
    UniqueFd pty(master);
    const std::string peer = ::ptsname(master);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
        error = "pipe failed";
        return std::nullopt;
    }
    UniqueFd read_end(out[0]), write_end(out[1]);
    const std::string errors_path = home + "/stderr";
    UniqueFd errors(::open(errors_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    std::vector<std::string> env{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                 "PYTHONIOENCODING=utf-8", "TERM=xterm"};
    CStrings argv(std::vector<std::string>{"asciinema", "cat", file});
    CStrings envp(env);
    const pid_t pid = ::fork();
    if (pid < 0) {
        error = "fork failed";
        return std::nullopt;
    }
    if (pid == 0) {
        ::setsid();
        const int tty = ::open(peer.c_str(), O_RDWR);  // the session's controlling terminal
        if (tty < 0) ::_exit(126);
        ::dup2(tty, 0);
        ::dup2(write_end.get(), 1);
        ::dup2(errors.get(), 2);
        ::execvpe("asciinema", argv.get(), envp.get());
        ::_exit(127);
    }
    write_end.reset();
    std::string text;
    const auto deadline = Clock::now() + kExit;
    char buffer[65536];
    for (;;) {
        if (wait_fd(read_end.get(), POLLIN, deadline) == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            error = "asciinema cat did not finish within " + std::to_string(kExit.count()) + " ms";
            return std::nullopt;
        }
        const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        error = "asciinema cat failed (status " + std::to_string(status) + "): " + read_text_file(errors_path);
        return std::nullopt;
    }
    return text;
}

TEST_F(Recording, AsciinemaCatPrintsExactlyTheSessionOutput) {
    if (std::system("command -v asciinema >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "*** asciinema is NOT installed: the recording was not checked against asciinema itself. "
                        "Install the Debian package 'asciinema' (scripts/install-deps.sh does) to run this test. ***";
    ASSERT_NE(start_daemon(recording_config()), nullptr);
    std::string output;
    const std::string id = run_session(output);
    ASSERT_EQ(id.size(), 32u) << id;
    const std::string home = *dir_ / "asciinema-home";
    ASSERT_EQ(::mkdir(home.c_str(), 0700), 0);
    std::string error;
    const auto printed = asciinema_cat(recordings_ + "/" + id + ".cast", home, error);
    ASSERT_TRUE(printed) << error;
    EXPECT_EQ(printed->size(), output.size());
    EXPECT_TRUE(*printed == output) << "asciinema cat printed something else than the session wrote";
}

TEST_F(Recording, TheSizeLimitEndsTheRecordingNotTheSession) {
    DaemonConfig c = recording_config();
    c.recording_max_bytes = 8192;
    ASSERT_NE(start_daemon(c), nullptr);
    std::string output;
    const std::string id = run_session(output);
    ASSERT_EQ(id.size(), 32u) << id;
    EXPECT_NE(output.find("\n3000\r\n"), std::string::npos) << "the session's output was cut";
    const std::string path = recordings_ + "/" + id + ".cast";
    const Cast cast = read_cast(path);
    ASSERT_EQ(cast.problem, "");
    EXPECT_LE(fs::file_size(path), 8192u);
    ASSERT_FALSE(cast.events.empty());
    EXPECT_EQ(cast.events.back()[1], "m") << cast.events.back();
    EXPECT_EQ(output.rfind(cast.output, 0), 0u) << "the recording is not a prefix of the output";
    EXPECT_LT(cast.output.size(), output.size());
    EXPECT_NE(daemon()->log().find("session recording stopped at its size limit"), std::string::npos)
        << daemon()->log();
}

void plant(const std::string& path, std::time_t mtime) {
    std::ofstream(path) << "{\"version\": 2, \"width\": 80, \"height\": 24}\n";
    const timespec times[2] = {{mtime, 0}, {mtime, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST_F(Recording, RecordingsOlderThanTheRetentionAreDeletedAtStart) {
    ASSERT_EQ(::mkdir(recordings_.c_str(), 0700), 0);
    const std::time_t now = std::time(nullptr);
    plant(recordings_ + "/old.cast", now - 3 * 24 * 3600);
    plant(recordings_ + "/recent.cast", now - 3600);
    plant(*dir_ / "elsewhere.cast", now - 3 * 24 * 3600);
    ASSERT_EQ(::symlink((*dir_ / "elsewhere.cast").c_str(), (recordings_ + "/link.cast").c_str()), 0);
    DaemonConfig c = recording_config();
    c.recording_retention = 2 * 24 * 3600;
    ASSERT_NE(start_daemon(c), nullptr);
    EXPECT_FALSE(fs::exists(recordings_ + "/old.cast"));
    EXPECT_TRUE(fs::exists(recordings_ + "/recent.cast"));
    EXPECT_TRUE(fs::is_symlink(recordings_ + "/link.cast"));
    EXPECT_TRUE(fs::exists(*dir_ / "elsewhere.cast"));
}

TEST_F(Recording, ADirectoryOthersCouldTamperWithKeepsTheDaemonFromStarting) {
    const std::string real = *dir_ / "real";
    ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
    ASSERT_EQ(::symlink(real.c_str(), recordings_.c_str()), 0);
    std::string error;
    EXPECT_EQ(DaemonProcess::start(recording_config(), dir_->path(), error), nullptr);
    EXPECT_NE(error.find("a symlink or not a directory"), std::string::npos) << error;

    const std::string shared = *dir_ / "shared";
    ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(shared.c_str(), 0770), 0);
    DaemonConfig c = recording_config();
    c.recording_directory = shared;
    EXPECT_EQ(DaemonProcess::start(c, dir_->path(), error), nullptr);
    EXPECT_NE(error.find("not root's alone"), std::string::npos) << error;

    const std::string owned = *dir_ / "owned";
    ASSERT_EQ(::mkdir(owned.c_str(), 0700), 0);
    ASSERT_EQ(::chown(owned.c_str(), account_->uid, account_->gid), 0);
    c.recording_directory = owned;
    EXPECT_EQ(DaemonProcess::start(c, dir_->path(), error), nullptr);
    EXPECT_NE(error.find("not root's alone"), std::string::npos) << error;
}

}  // namespace
}  // namespace ptyvisor::itest

namespace ptyvisor::itest {
namespace {

// RECORDING (protocol version 5): people who supervise read a recording over the socket, as it
// is on disk, in parts; the agent, whose recording is kept where it cannot touch it, may not.
TEST_F(Recording, PeopleReadTheRecordingOverTheSocketTheAgentMayNot) {
    ASSERT_NE(start_daemon(recording_config()), nullptr);
    std::string output;
    const std::string id = run_session(output);
    ASSERT_EQ(id.size(), 32u) << id;
    std::ifstream in(recordings_ + "/" + id + ".cast", std::ios::binary);
    const std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(on_disk.size(), 100u);

    const auto fetch = [&](std::unique_ptr<RawClient> c, std::uint64_t offset, std::uint64_t max,
                           std::string& bytes) -> std::string {
        if (!c) return "(no connection)";
        if (c->send_frame(protocol::FrameType::Recording, protocol::encode(protocol::RecordingRequest{id, offset, max})) != 0)
            return "(send failed)";
        auto first = c->next(Millis(10000));
        if (first.kind != Incoming::Kind::Frame) return first.describe();
        if (first.frame.type == protocol::FrameType::Error) {
            const auto e = protocol::decode_error(first.frame.text());
            return e ? std::string(protocol::to_string(e.value->code)) : "(bad ERROR)";
        }
        const auto cast = protocol::decode_cast(first.frame.text());
        if (!cast) return "(bad CAST) " + cast.error;
        EXPECT_EQ(cast.value->size, on_disk.size());
        for (;;) {
            auto f = c->next(Millis(10000));
            if (f.kind == Incoming::Kind::Eof) break;
            if (f.kind != Incoming::Kind::Frame || f.frame.type != protocol::FrameType::Output) return f.describe();
            bytes.append(f.frame.text());
        }
        EXPECT_EQ(bytes.size(), cast.value->length);
        return "cast";
    };
    std::string whole, head, tail;
    EXPECT_EQ(fetch(connect_as(0, 0, {0}), 0, protocol::kDefaultRecordingChunk, whole), "cast");
    EXPECT_TRUE(whole == on_disk) << "the recording read over the socket differs from the file";
    EXPECT_EQ(fetch(connect_as(0, 0, {0}), 0, 100, head), "cast");
    EXPECT_EQ(fetch(connect_as(0, 0, {0}), 100, protocol::kMaxRecordingChunk, tail), "cast");
    EXPECT_TRUE(head + tail == on_disk);
    std::string nothing;
    EXPECT_EQ(fetch(connect_as_account(), 0, 100, nothing), "not_allowed");
    EXPECT_EQ(nothing, "");
}

}  // namespace
}  // namespace ptyvisor::itest
