#include "server/session_handover.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>


namespace ptyvisor::server {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef";

HandoverRecord sample() {
    HandoverRecord r;
    r.id = kId;
    r.unit = "ptyvisor-" + kId + ".service";
    r.argv = {"bash", "-c", "echo \xff"};
    r.cwd = "/home/agent";
    r.created = 1700000000;
    r.starter_pid = 42;
    r.main_pid = 4242;
    r.detached = true;
    r.size = {50, 132};
    r.bytes_in = 7;
    return r;
}

// Issue 24: an argv near START's 256 KiB bound, of bytes JSON escapes sixfold, made the
// metadata larger than its cap, and the session could not be handed over.
TEST(SessionHandover, TheLargestArgvAStartCanCarryRoundTrips) {
    auto in = sample();
    in.argv = {"printf", std::string(250 * 1024, '\x01')};
    const std::string text = encode_handover(in);
    EXPECT_GT(text.size(), 256u * 1024);
    HandoverRecord out;
    std::string why;
    ASSERT_TRUE(decode_handover(text, "ptyvisor", out, why)) << why;
    EXPECT_EQ(out.argv, in.argv);
}

TEST(SessionHandover, RecordRoundTrips) {
    const auto in = sample();
    HandoverRecord out;
    std::string why;
    ASSERT_TRUE(decode_handover(encode_handover(in), "ptyvisor", out, why)) << why;
    EXPECT_EQ(out.id, in.id);
    EXPECT_EQ(out.unit, in.unit);
    EXPECT_EQ(out.argv.size(), 3u);
    EXPECT_EQ(out.argv[0], "bash");
    EXPECT_EQ(out.cwd, in.cwd);
    EXPECT_EQ(out.created, in.created);
    EXPECT_EQ(out.starter_pid, in.starter_pid);
    EXPECT_EQ(out.main_pid, in.main_pid);
    EXPECT_TRUE(out.detached);
    EXPECT_EQ(out.size, in.size);
    EXPECT_EQ(out.bytes_in, 7u);
}

TEST(SessionHandover, RecordsThatCannotBeOursAreRefused) {
    HandoverRecord out;
    std::string why;
    auto with = [](auto change) {
        auto r = sample();
        change(r);
        return encode_handover(r);
    };
    EXPECT_FALSE(decode_handover(with([](HandoverRecord&) {}), "other", out, why));  // another prefix
    EXPECT_FALSE(decode_handover(with([](HandoverRecord& r) { r.id = "../x"; }), "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover(with([](HandoverRecord& r) { r.unit = "sshd.service"; }), "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover(with([](HandoverRecord& r) { r.main_pid = 1; }), "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover(with([](HandoverRecord& r) { r.argv.clear(); }), "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover(with([](HandoverRecord& r) { r.size.rows = 0; }), "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover("not json", "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover("[]", "ptyvisor", out, why));
    EXPECT_FALSE(decode_handover(std::string(HandoverRecord::kMaxBytes + 1, ' '), "ptyvisor", out, why));
    auto j = encode_handover(sample());
    j.replace(j.find("\"version\":1"), 11, "\"version\":2");
    EXPECT_FALSE(decode_handover(j, "ptyvisor", out, why));
    EXPECT_EQ(why, "field version out of range");
}

TEST(SessionHandover, NamesParseStrictly) {
    EXPECT_EQ(handover_name("pty", kId), "pty-" + kId);
    EXPECT_EQ(parse_handover_name("pty-" + kId), (std::pair<std::string, std::string>{"pty", kId}));
    EXPECT_EQ(parse_handover_name("meta-" + kId).first, "meta");
    EXPECT_EQ(parse_handover_name("listener").first, "listener");
    EXPECT_EQ(parse_handover_name("tty-" + kId).first, "");
    EXPECT_EQ(parse_handover_name("log-" + kId.substr(1)).first, "");
    EXPECT_EQ(parse_handover_name("log-" + kId + "x").first, "");
    EXPECT_EQ(parse_handover_name("").first, "");
}

TEST(SessionHandover, MetadataMemfdIsSealedAndReadBack) {
    UniqueFd fd;
    ASSERT_EQ(make_sealed_memfd("test", "hello", fd), 0);
    EXPECT_LT(::write(fd.get(), "x", 1), 0);  // sealed against writes
    std::string text;
    ASSERT_EQ(read_sealed_memfd(fd.get(), 100, text), 0);
    EXPECT_EQ(text, "hello");
    EXPECT_EQ(read_sealed_memfd(fd.get(), 4, text), -EBADMSG);  // larger than allowed
}

TEST(SessionHandover, UnsealedOrForeignMetadataIsRefused) {
    UniqueFd memfd(::memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(memfd);
    ASSERT_EQ(::write(memfd.get(), "{}", 2), 2);
    std::string text;
    EXPECT_EQ(read_sealed_memfd(memfd.get(), 100, text), -EBADMSG);  // it could still change
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
    UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
    EXPECT_EQ(read_sealed_memfd(r.get(), 100, text), -EBADMSG);
}

TEST(SessionHandover, OnlyAPtyMasterIsTakenForATerminal) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(master);
    EXPECT_TRUE(is_pty_master(master.get()));
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    EXPECT_FALSE(is_pty_master(null.get()));
}

}  // namespace
}  // namespace ptyvisor::server
