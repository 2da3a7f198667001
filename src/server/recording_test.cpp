// Session recordings (recording.h): the asciicast v2 file, UTF-8 as asciinema decodes it, the
// size limit, write failures, the directory's checks and the deletion of expired files.
#include "server/recording.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ptyvisor::server {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::span<const std::uint8_t> bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

const std::string kFFFD = "\xEF\xBF\xBD";

class RecorderFile : public ::testing::Test {
protected:
    void SetUp() override {
        char name[] = "/tmp/ptyvisor-recording-XXXXXX";
        ASSERT_NE(::mkdtemp(name), nullptr);
        root_ = name;
        dir_.reset(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        ASSERT_TRUE(dir_);
    }
    void TearDown() override { fs::remove_all(root_); }

    Recorder::Setup setup(std::string name = "s.cast") {
        Recorder::Setup s;
        s.name = std::move(name);
        s.path = root_ + "/" + s.name;
        s.size = {24, 80};
        s.timestamp = 1700000000;
        s.command = "sh -c \"echo hi\"";
        s.term = "xterm-256color";
        s.clock = [this] { return now_; };
        return s;
    }

    std::unique_ptr<Recorder> create(Recorder::Setup s) {
        std::unique_ptr<Recorder> r;
        EXPECT_EQ(Recorder::create(dir_.get(), std::move(s), r), 0);
        return r;
    }

    std::vector<std::string> lines(const std::string& name = "s.cast") const {
        std::ifstream in(root_ + "/" + name, std::ios::binary);
        std::vector<std::string> out;
        for (std::string line; std::getline(in, line);) out.push_back(line);
        return out;
    }

    // Every line after the header, parsed; a line that is not JSON fails the test.
    std::vector<json> events(const std::string& name = "s.cast") const {
        std::vector<json> out;
        const auto all = lines(name);
        for (std::size_t i = 1; i < all.size(); ++i) {
            auto e = json::parse(all[i], nullptr, false);
            EXPECT_FALSE(e.is_discarded()) << "line " << i + 1 << " is not JSON: " << all[i];
            EXPECT_TRUE(e.is_array() && e.size() == 3) << all[i];
            out.push_back(std::move(e));
        }
        return out;
    }

    // The concatenated text of the "o" events.
    std::string output_text(const std::string& name = "s.cast") const {
        std::string out;
        for (const auto& e : events(name))
            if (e[1] == "o") out += e[2].get<std::string>();
        return out;
    }

    std::string root_;
    UniqueFd dir_;
    std::uint64_t now_ = 5'000'000;
};

TEST_F(RecorderFile, HeaderHoldsSizeTimestampCommandAndTerm) {
    auto r = create(setup());
    ASSERT_TRUE(r);
    r->finish();
    const auto all = lines();
    ASSERT_EQ(all.size(), 1u);
    const auto header = json::parse(all[0], nullptr, false);
    ASSERT_FALSE(header.is_discarded()) << all[0];
    EXPECT_EQ(header["version"], 2);
    EXPECT_EQ(header["width"], 80);
    EXPECT_EQ(header["height"], 24);
    EXPECT_EQ(header["timestamp"], 1700000000);
    EXPECT_EQ(header["command"], "sh -c \"echo hi\"");
    EXPECT_EQ(header["env"]["TERM"], "xterm-256color");
    // asciinema's own layout.
    EXPECT_EQ(all[0].rfind("{\"version\": 2, \"width\": 80, \"height\": 24, ", 0), 0u) << all[0];

    struct stat st{};
    ASSERT_EQ(::stat((root_ + "/s.cast").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_uid, ::geteuid());
}

TEST_F(RecorderFile, HeaderWithoutTermAndWithInvalidUtf8IsStillJson) {
    auto s = setup();
    s.term.reset();
    s.command = "printf \xff\xfe";
    auto r = create(std::move(s));
    ASSERT_TRUE(r);
    r->finish();
    const auto header = json::parse(lines().at(0), nullptr, false);
    ASSERT_FALSE(header.is_discarded());
    EXPECT_TRUE(header["env"].is_object() && header["env"].empty());
    EXPECT_EQ(header["command"], "printf " + kFFFD + kFFFD);
}

TEST_F(RecorderFile, EventsAreJsonLinesWithSecondsSinceTheStart) {
    auto r = create(setup());
    ASSERT_TRUE(r);
    now_ += 1'500'000;
    r->output(bytes("hello \"world\"\r\n\x1b[1mbold\\\t\x01\x7f"));
    now_ += 250;
    r->resize({40, 132});
    r->resize({40, 132});  // unchanged: no event
    now_ += 2'000'000;
    r->output(bytes("first "), bytes("second"));  // a view's two pieces: one event
    r->finish();
    const auto e = events();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_DOUBLE_EQ(e[0][0].get<double>(), 1.5);
    EXPECT_EQ(e[0][1], "o");
    EXPECT_EQ(e[0][2], "hello \"world\"\r\n\x1b[1mbold\\\t\x01\x7f");
    EXPECT_DOUBLE_EQ(e[1][0].get<double>(), 1.50025);
    EXPECT_EQ(e[1][1], "r");
    EXPECT_EQ(e[1][2], "132x40");
    EXPECT_EQ(e[2][2], "first second");
    EXPECT_EQ(lines()[1].rfind("[1.500000, \"o\", ", 0), 0u) << lines()[1];
}

TEST_F(RecorderFile, AUtf8CharacterSplitAcrossReadsIsCarriedToTheNextEvent) {
    auto r = create(setup());
    ASSERT_TRUE(r);
    const std::string euro = "\xE2\x82\xAC", smile = "\xF0\x9F\x98\x80";
    r->output(bytes("price: \xE2"));
    r->output(bytes("\x82"));  // still incomplete: no event at all
    r->output(bytes("\xAC" "5 \xF0\x9F"));
    r->output(bytes("\x98"), bytes("\x80!"));
    r->finish();
    const auto e = events();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0][2], "price: ");
    EXPECT_EQ(e[1][2], euro + "5 ");
    EXPECT_EQ(e[2][2], smile + "!");
    EXPECT_EQ(output_text(), "price: " + euro + "5 " + smile + "!");
}

TEST_F(RecorderFile, InvalidBytesAreReplacedAndTheFileStaysValid) {
    auto r = create(setup());
    ASSERT_TRUE(r);
    r->output(bytes("ok \xff\xfe \xC0\xAF"));
    r->output(bytes("\xED\xA0\x80 end \xE2\x82"));  // ends inside a character
    r->finish();
    EXPECT_EQ(output_text(), "ok " + kFFFD + kFFFD + " " + kFFFD + kFFFD + kFFFD + kFFFD + kFFFD + " end " + kFFFD);
}

TEST_F(RecorderFile, TheSizeLimitEndsTheRecordingWithAMarker) {
    auto s = setup();
    s.max_bytes = 4096;
    auto r = create(std::move(s));
    ASSERT_TRUE(r);
    const std::string chunk(100, 'x');
    int written = 0;
    for (; written < 100 && r->recording(); ++written) {
        now_ += 1000;
        r->output(bytes(chunk));
    }
    EXPECT_FALSE(r->recording());
    EXPECT_LT(written, 100);
    const auto size = fs::file_size(root_ + "/s.cast");
    EXPECT_LE(size, 4096u);
    EXPECT_EQ(size, r->bytes_written());
    r->output(bytes(chunk));  // ignored from now on
    r->resize({50, 200});
    r->finish();
    EXPECT_EQ(fs::file_size(root_ + "/s.cast"), size);
    const auto e = events();
    ASSERT_FALSE(e.empty());
    EXPECT_EQ(e.back()[1], "m");
    EXPECT_NE(e.back()[2].get<std::string>().find("max_bytes (4096)"), std::string::npos) << e.back();
    for (std::size_t i = 0; i + 1 < e.size(); ++i) EXPECT_EQ(e[i][2], chunk);
}

// A failed write (here the file size limit: EFBIG) ends the recording with whole lines only.
TEST_F(RecorderFile, AWriteErrorStopsTheRecordingAtItsLastWholeLine) {
    auto r = create(setup());
    ASSERT_TRUE(r);
    r->output(bytes("before\r\n"));
    const auto good = fs::file_size(root_ + "/s.cast");
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved;
    small.rlim_cur = good + 10;  // part of the next line fits
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    r->output(bytes(std::string(100, 'y')));
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_FALSE(r->recording());
    EXPECT_EQ(fs::file_size(root_ + "/s.cast"), good);
    r->output(bytes("after"));
    r->finish();
    EXPECT_EQ(output_text(), "before\r\n");
}

TEST_F(RecorderFile, CreateRefusesAnExistingFileOrSymlink) {
    ASSERT_EQ(::symlink("/etc/passwd", (root_ + "/link.cast").c_str()), 0);
    std::unique_ptr<Recorder> r;
    EXPECT_EQ(Recorder::create(dir_.get(), setup("link.cast"), r), -EEXIST);
    EXPECT_FALSE(r);
    auto first = create(setup("twice.cast"));
    EXPECT_EQ(Recorder::create(dir_.get(), setup("twice.cast"), r), -EEXIST);
    EXPECT_FALSE(r);
}

// --- the directory ------------------------------------------------------------------------

class RecordingDirectory : public RecorderFile {
protected:
    void SetUp() override {
        RecorderFile::SetUp();
        ASSERT_EQ(sd_event_new(&event_), 0);
    }
    void TearDown() override {
        sd_event_unref(event_);
        RecorderFile::TearDown();
    }
    static Recording config(const std::string& directory) {
        Recording c;
        c.directory = directory;
        return c;
    }
    sd_event* event_ = nullptr;
};

TEST_F(RecordingDirectory, IsCreated0700AndHoldsOneFilePerSession) {
    Recordings recordings(config(root_ + "/casts"), event_);
    ASSERT_EQ(recordings.init(), 0);
    EXPECT_TRUE(recordings.enabled());
    struct stat st{};
    ASSERT_EQ(::lstat((root_ + "/casts").c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_EQ(st.st_uid, ::geteuid());

    const std::string id = "0123456789abcdef0123456789abcdef";
    auto r = recordings.start(id, {"sh", "-c", "ls -l"}, {"HOME=/x", "TERM=xterm", "TERM=other"}, {30, 100});
    ASSERT_TRUE(r);
    r->output(bytes("hi"));
    r.reset();
    const auto all = lines("casts/" + id + ".cast");
    ASSERT_EQ(all.size(), 2u);
    const auto header = json::parse(all[0]);
    EXPECT_EQ(header["command"], "sh -c ls -l");
    EXPECT_EQ(header["env"]["TERM"], "xterm");
    EXPECT_EQ(header["width"], 100);
    EXPECT_EQ(header["height"], 30);
    EXPECT_EQ(json::parse(all[1])[2], "hi");
    // A second session under the same id never reuses (or truncates) the file.
    EXPECT_FALSE(recordings.start(id, {"true"}, {}, {24, 80}));
    EXPECT_EQ(lines("casts/" + id + ".cast").size(), 2u);
}

TEST_F(RecordingDirectory, OffWhenNoDirectoryIsConfigured) {
    Recordings recordings(config(""), event_);
    ASSERT_EQ(recordings.init(), 0);
    EXPECT_FALSE(recordings.enabled());
    EXPECT_FALSE(recordings.start("0123456789abcdef0123456789abcdef", {"true"}, {}, {24, 80}));
}

TEST_F(RecordingDirectory, ASymlinkIsRefused) {
    ASSERT_EQ(::mkdir((root_ + "/real").c_str(), 0700), 0);
    ASSERT_EQ(::symlink((root_ + "/real").c_str(), (root_ + "/casts").c_str()), 0);
    Recordings recordings(config(root_ + "/casts"), event_);
    const int r = recordings.init();
    EXPECT_TRUE(r == -ENOTDIR || r == -ELOOP) << r;
    EXPECT_FALSE(recordings.enabled());
}

TEST_F(RecordingDirectory, ADirectoryWritableByGroupOrOthersIsRefused) {
    for (const mode_t mode : {0777, 0770, 0702}) {
        const std::string path = root_ + "/casts" + std::to_string(mode);
        ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
        ASSERT_EQ(::chmod(path.c_str(), mode), 0);
        Recordings recordings(config(path), event_);
        EXPECT_EQ(recordings.init(), -EPERM) << std::oct << mode;
    }
}

TEST_F(RecordingDirectory, ADirectoryOfAnotherOwnerIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
    const std::string path = root_ + "/casts";
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
    ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
    Recordings recordings(config(path), event_);
    EXPECT_EQ(recordings.init(), -EPERM);
}

// --- retention ----------------------------------------------------------------------------

void touch(const std::string& path, std::time_t mtime, bool nofollow = false) {
    const timespec times[2] = {{mtime, 0}, {mtime, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, nofollow ? AT_SYMLINK_NOFOLLOW : 0), 0) << path;
}

void plant(const std::string& path, std::time_t mtime) {
    std::ofstream(path) << "{}\n";
    touch(path, mtime);
}

TEST_F(RecorderFile, RetentionDeletesOldRecordingsOnlyAndNeverFollowsALink) {
    const std::time_t now = std::time(nullptr);
    const std::time_t week = 7 * 24 * 3600, old = now - week - 3600, recent = now - 60;
    ASSERT_EQ(::mkdir((root_ + "/casts").c_str(), 0700), 0);
    const std::string d = root_ + "/casts/";
    plant(d + "old.cast", old);
    plant(d + "new.cast", recent);
    plant(d + "open.cast", old);   // being recorded
    plant(d + "notes.txt", old);   // not a recording
    plant(root_ + "/outside.cast", old);
    ASSERT_EQ(::symlink((root_ + "/outside.cast").c_str(), (d + "link.cast").c_str()), 0);
    touch(d + "link.cast", old, true);  // the link itself is old too
    ASSERT_EQ(::mkdir((d + "dir.cast").c_str(), 0700), 0);
    touch(d + "dir.cast", old);

    const UniqueFd casts(::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(casts);
    EXPECT_EQ(delete_expired_recordings(casts.get(), now - week, {"open.cast"}), 1);
    EXPECT_FALSE(fs::exists(d + "old.cast"));
    EXPECT_TRUE(fs::exists(d + "new.cast"));
    EXPECT_TRUE(fs::exists(d + "open.cast"));
    EXPECT_TRUE(fs::exists(d + "notes.txt"));
    EXPECT_TRUE(fs::is_symlink(d + "link.cast"));
    EXPECT_TRUE(fs::exists(root_ + "/outside.cast"));
    EXPECT_TRUE(fs::is_directory(d + "dir.cast"));
}

TEST_F(RecordingDirectory, ExpiredRecordingsGoAtStartUnlessRetentionIsZero) {
    const std::string d = root_ + "/casts";
    ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
    const std::time_t now = std::time(nullptr);
    plant(d + "/old.cast", now - 8 * 24 * 3600);
    plant(d + "/new.cast", now - 6 * 24 * 3600);
    {
        auto c = config(d);
        c.retention = std::chrono::seconds(0);  // kept forever
        Recordings recordings(c, event_);
        ASSERT_EQ(recordings.init(), 0);
        EXPECT_TRUE(fs::exists(d + "/old.cast"));
    }
    Recordings recordings(config(d), event_);  // the default: 7 days
    ASSERT_EQ(recordings.init(), 0);
    EXPECT_FALSE(fs::exists(d + "/old.cast"));
    EXPECT_TRUE(fs::exists(d + "/new.cast"));
}

}  // namespace
}  // namespace ptyvisor::server
