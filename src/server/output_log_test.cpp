#include "server/output_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <string>

namespace ptyvisor::server {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kCap = OutputLog::kMinCapacity;

// The documented header layout, spelled out independently of output_log.cpp.
struct RawHeader {
    char magic[8];
    std::uint32_t version;
    std::uint32_t reserved;
    std::uint64_t capacity;
    std::uint64_t start;
    std::uint64_t end;
};

// A byte that depends on its offset, with no period that divides a capacity: a byte put at
// the wrong ring position or returned for the wrong offset shows.
std::uint8_t pattern_byte(std::uint64_t offset) {
    return static_cast<std::uint8_t>((offset * 0x9E3779B97F4A7C15ull) >> 56);
}

Bytes pattern(std::uint64_t from, std::size_t n) {
    Bytes out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = pattern_byte(from + i);
    return out;
}

Bytes joined(const OutputLog::View& v) {
    Bytes out(v.first.begin(), v.first.end());
    out.insert(out.end(), v.second.begin(), v.second.end());
    return out;
}

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

std::unique_ptr<OutputLog> make_log(std::size_t capacity = kCap) {
    std::unique_ptr<OutputLog> log;
    const int r = OutputLog::create("output-log-test", capacity, log);
    EXPECT_EQ(r, 0) << std::strerror(-r);
    return log;
}

void append_pattern(OutputLog& log, std::size_t n, std::size_t chunk) {
    for (std::size_t done = 0; done < n;) {
        const std::size_t k = std::min(chunk, n - done);
        log.append(pattern(log.end(), k));
        done += k;
    }
}

struct Pipe {
    UniqueFd read, write;
    Pipe() {
        int fds[2];
        EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        read.reset(fds[0]);
        write.reset(fds[1]);
    }
    void put(const Bytes& bytes) const {
        ASSERT_EQ(::write(write.get(), bytes.data(), bytes.size()),
                  static_cast<ssize_t>(bytes.size()));
    }
};

UniqueFd dup_of(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

RawHeader valid_header(std::uint64_t start = 0, std::uint64_t end = 0) {
    RawHeader h{};
    std::memcpy(h.magic, "PTYVLOG1", 8);
    h.version = OutputLog::kVersion;
    h.capacity = kCap;
    h.start = start;
    h.end = end;
    return h;
}

constexpr int kGoodSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A memfd as another program could hand us: `h` at offset 0, `size` bytes, `seals` added.
UniqueFd forge(const RawHeader& h, std::uint64_t size = OutputLog::kHeaderSize + kCap,
               int seals = kGoodSeals, unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING) {
    UniqueFd fd(::memfd_create("forged", flags));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
    if (size >= sizeof h) {
        EXPECT_EQ(::pwrite(fd.get(), &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    }
    if (seals != 0) {
        EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
    }
    return fd;
}

int adopt(UniqueFd fd) {
    std::unique_ptr<OutputLog> log;
    const int r = OutputLog::adopt(std::move(fd), log);
    EXPECT_EQ(r == 0, log != nullptr);
    return r;
}

TEST(OutputLog, EmptyLogHoldsNothing) {
    auto log = make_log();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->start(), 0u);
    EXPECT_EQ(log->end(), 0u);
    EXPECT_EQ(log->capacity(), kCap);
    EXPECT_GE(log->fd(), 0);
    EXPECT_EQ(log->view(0, 100).size(), 0u);
    EXPECT_EQ(log->view(5, 100).size(), 0u);
    EXPECT_TRUE(log->copy(0, 100).empty());
}

TEST(OutputLog, CapacityIsClampedAndRoundedToPages) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    EXPECT_EQ(make_log(0)->capacity(), OutputLog::kMinCapacity);
    EXPECT_EQ(make_log(1)->capacity(), OutputLog::kMinCapacity);
    EXPECT_EQ(make_log(OutputLog::kMinCapacity + 1)->capacity(), OutputLog::kMinCapacity + page);
    EXPECT_EQ(make_log(OutputLog::kDefaultCapacity)->capacity(), OutputLog::kDefaultCapacity);
    // Sparse, so even the largest costs only its header page.
    EXPECT_EQ(make_log(SIZE_MAX)->capacity(), OutputLog::kMaxCapacity);
}

TEST(OutputLog, MemfdIsSizedAndSealedAgainstShrinking) {
    auto log = make_log();
    struct stat st {};
    ASSERT_EQ(::fstat(log->fd(), &st), 0);
    EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), OutputLog::kHeaderSize + kCap);
    EXPECT_EQ(::fcntl(log->fd(), F_GET_SEALS), kGoodSeals);
    EXPECT_EQ(::ftruncate(log->fd(), 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::fcntl(log->fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

TEST(OutputLog, AppendAndViewWithinCapacity) {
    auto log = make_log();
    log->append(text("hello world"));
    EXPECT_EQ(log->start(), 0u);
    EXPECT_EQ(log->end(), 11u);
    EXPECT_EQ(joined(log->view(0, 5)), text("hello"));
    EXPECT_EQ(joined(log->view(6, 100)), text("world"));
    EXPECT_EQ(log->copy(3, 4), text("lo w"));
    EXPECT_EQ(log->copy(0, SIZE_MAX), text("hello world"));
    EXPECT_TRUE(log->view(0, 100).second.empty());
    log->append({});
    EXPECT_EQ(log->end(), 11u);
}

TEST(OutputLog, WrapAroundKeepsTheLastCapacityBytes) {
    auto log = make_log();
    append_pattern(*log, 3 * kCap, 4093);  // a chunk size that does not divide the capacity
    EXPECT_EQ(log->end(), 3 * kCap);
    EXPECT_EQ(log->start(), log->end() - kCap);
    EXPECT_EQ(joined(log->view(log->start(), kCap)), pattern(log->start(), kCap));

    // Now the held range wraps the ring end: the view comes in two pieces.
    append_pattern(*log, 1000, 1000);
    EXPECT_EQ(log->start(), log->end() - kCap);
    const auto v = log->view(log->start(), kCap);
    EXPECT_EQ(v.first.size(), kCap - 1000);
    EXPECT_EQ(v.second.size(), 1000u);
    EXPECT_EQ(joined(v), pattern(log->start(), kCap));
    EXPECT_EQ(log->copy(log->end() - 1500, 1200), pattern(log->end() - 1500, 1200));
}

TEST(OutputLog, AppendLongerThanCapacityKeepsItsTailAndCountsAllOffsets) {
    auto log = make_log();
    log->append(text("x"));
    const Bytes big = pattern(1, 2 * kCap + kCap / 2);
    log->append(big);
    EXPECT_EQ(log->end(), 1 + big.size());
    EXPECT_EQ(log->start(), log->end() - kCap);
    EXPECT_EQ(log->copy(0, SIZE_MAX), pattern(log->start(), kCap));
}

TEST(OutputLog, ViewClampsBelowStartAndAboveEnd) {
    auto log = make_log();
    append_pattern(*log, kCap + 5000, 7000);
    const std::uint64_t start = log->start();
    ASSERT_EQ(start, 5000u);
    // Below start: the dropped bytes are gone, the view begins at start.
    EXPECT_EQ(joined(log->view(0, 10)), pattern(start, 10));
    EXPECT_EQ(joined(log->view(start - 1, 10)), pattern(start, 10));
    // At or above end: nothing, never bytes from outside the held range.
    EXPECT_EQ(log->view(log->end(), 10).size(), 0u);
    EXPECT_EQ(log->view(log->end() + 5, 10).size(), 0u);
    EXPECT_EQ(log->view(UINT64_MAX, SIZE_MAX).size(), 0u);
    // max past end: up to end only.
    EXPECT_EQ(log->view(log->end() - 3, 100).size(), 3u);
    EXPECT_EQ(log->view(0, SIZE_MAX).size(), kCap);
    EXPECT_EQ(log->view(start, 0).size(), 0u);
}

TEST(OutputLog, ReadFromAPipeIncludingAReadThatStraddlesTheRingEnd) {
    auto log = make_log();
    Pipe p;
    p.put(pattern(0, 300));
    EXPECT_EQ(log->read_from(p.read.get(), 1000), 300);
    EXPECT_EQ(log->end(), 300u);
    EXPECT_EQ(log->copy(0, SIZE_MAX), pattern(0, 300));

    // Fill to 100 bytes short of the ring end, then read 300: 100 at the end, 200 at the front.
    append_pattern(*log, kCap - 400, 4096);
    ASSERT_EQ(log->end(), kCap - 100);
    p.put(pattern(log->end(), 300));
    EXPECT_EQ(log->read_from(p.read.get(), kCap), 300);
    EXPECT_EQ(log->end(), kCap + 200);
    EXPECT_EQ(log->start(), 200u);
    const auto v = log->view(log->end() - 300, 300);
    EXPECT_EQ(v.first.size(), 100u);
    EXPECT_EQ(v.second.size(), 200u);
    EXPECT_EQ(joined(v), pattern(kCap - 100, 300));
    EXPECT_EQ(joined(log->view(log->start(), SIZE_MAX)), pattern(log->start(), kCap));
}

TEST(OutputLog, ReadFromTakesAtMostMax) {
    auto log = make_log();
    Pipe p;
    p.put(pattern(0, 1000));
    EXPECT_EQ(log->read_from(p.read.get(), 100), 100);
    EXPECT_EQ(log->read_from(p.read.get(), 10 * kCap), 900);  // more than capacity: capacity
    EXPECT_EQ(log->copy(0, SIZE_MAX), pattern(0, 1000));
    EXPECT_EQ(log->read_from(p.read.get(), 0), -EINVAL);
}

TEST(OutputLog, ReadFromReturnsEagainWhenEmptyAndZeroAtEof) {
    auto log = make_log();
    Pipe p;
    EXPECT_EQ(log->read_from(p.read.get(), 4096), -EAGAIN);
    p.put(text("bye"));
    p.write.reset();
    EXPECT_EQ(log->read_from(p.read.get(), 4096), 3);
    EXPECT_EQ(log->read_from(p.read.get(), 4096), 0);
    EXPECT_EQ(log->end(), 3u);
    EXPECT_EQ(log->read_from(-1, 4096), -EBADF);
    EXPECT_EQ(log->end(), 3u);
}

TEST(OutputLog, ReadFromAPtyMasterGetsEioOnceThePeerIsGone) {
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
    if (!master || ::unlockpt(master.get()) < 0)
        GTEST_SKIP() << "no PTYs here: " << std::strerror(errno);
    UniqueFd peer(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(peer.valid()) << std::strerror(errno);
    termios t{};
    ASSERT_EQ(::tcgetattr(peer.get(), &t), 0);
    ::cfmakeraw(&t);
    ASSERT_EQ(::tcsetattr(peer.get(), TCSANOW, &t), 0);
    ASSERT_EQ(::write(peer.get(), "abc", 3), 3);
    peer.reset();

    auto log = make_log();
    ssize_t r = 0;
    for (int i = 0; i < 100; ++i) {
        pollfd pfd{master.get(), POLLIN, 0};
        ::poll(&pfd, 1, 100);
        r = log->read_from(master.get(), 4096);
        if (r != -EAGAIN && r <= 0) break;
    }
    EXPECT_EQ(r, -EIO);
    EXPECT_EQ(log->copy(0, SIZE_MAX), text("abc"));
}

TEST(OutputLog, AdoptOfACreatedLogSeesTheSameBytes) {
    auto log = make_log();
    append_pattern(*log, 2 * kCap + 777, 5000);
    std::unique_ptr<OutputLog> adopted;
    ASSERT_EQ(OutputLog::adopt(dup_of(log->fd()), adopted), 0);
    EXPECT_EQ(adopted->capacity(), log->capacity());
    EXPECT_EQ(adopted->start(), log->start());
    EXPECT_EQ(adopted->end(), log->end());
    EXPECT_EQ(adopted->copy(0, SIZE_MAX), pattern(log->start(), kCap));

    // The adopted log goes on where the old one stopped.
    log.reset();
    adopted->append(pattern(adopted->end(), 100));
    EXPECT_EQ(adopted->end(), 2 * kCap + 877);
    EXPECT_EQ(adopted->copy(0, SIZE_MAX), pattern(adopted->start(), kCap));
}

TEST(OutputLog, HeaderIsExactAfterAShortReadIntoAFullRing) {
    // read_from moves the header's start past all that a read of `max` could overwrite, then
    // back for what a shorter read did not: adopt() must see the log's own start and end.
    auto log = make_log();
    append_pattern(*log, kCap, 4096);
    Pipe p;
    p.put(pattern(log->end(), 10));
    ASSERT_EQ(log->read_from(p.read.get(), kCap), 10);
    ASSERT_EQ(log->read_from(p.read.get(), kCap), -EAGAIN);
    std::unique_ptr<OutputLog> adopted;
    ASSERT_EQ(OutputLog::adopt(dup_of(log->fd()), adopted), 0);
    EXPECT_EQ(adopted->start(), 10u);
    EXPECT_EQ(adopted->start(), log->start());
    EXPECT_EQ(adopted->end(), log->end());
    EXPECT_EQ(adopted->copy(0, SIZE_MAX), pattern(10, kCap));
}

TEST(OutputLog, AdoptTakesAForgedValidMemfd) {
    // The control for the refusals below: forge() itself makes something adopt() takes.
    EXPECT_EQ(adopt(forge(valid_header())), 0);
    EXPECT_EQ(adopt(forge(valid_header(100, 100 + kCap))), 0);
}

TEST(OutputLog, AdoptRefusesABadMagicOrVersion) {
    RawHeader h = valid_header();
    h.magic[7] = '2';
    EXPECT_EQ(adopt(forge(h)), -EBADMSG);
    h = valid_header();
    h.version = OutputLog::kVersion + 1;
    EXPECT_EQ(adopt(forge(h)), -EBADMSG);
    h = valid_header();
    h.reserved = 1;
    EXPECT_EQ(adopt(forge(h)), -EBADMSG);
    EXPECT_EQ(adopt(forge(RawHeader{})), -EBADMSG);  // all zero: sized and sealed, never written
}

TEST(OutputLog, AdoptRefusesAWrongSizeOrCapacity) {
    const std::uint64_t right = OutputLog::kHeaderSize + kCap;
    EXPECT_EQ(adopt(forge(valid_header(), right + 4096)), -EBADMSG);
    EXPECT_EQ(adopt(forge(valid_header(), right - 4096)), -EBADMSG);
    EXPECT_EQ(adopt(forge(valid_header(), OutputLog::kHeaderSize)), -EBADMSG);
    EXPECT_EQ(adopt(forge(valid_header(), 16)), -EBADMSG);  // shorter than a header
    EXPECT_EQ(adopt(forge(valid_header(), 0)), -EBADMSG);

    // The capacity must be what create() makes, and the size must follow from it.
    RawHeader h = valid_header();
    h.capacity = kCap + 1;
    EXPECT_EQ(adopt(forge(h, OutputLog::kHeaderSize + h.capacity)), -EBADMSG);
    h.capacity = kCap / 2;
    EXPECT_EQ(adopt(forge(h, OutputLog::kHeaderSize + h.capacity)), -EBADMSG);
    h.capacity = 2 * OutputLog::kMaxCapacity;
    EXPECT_EQ(adopt(forge(h, OutputLog::kHeaderSize + h.capacity)), -EBADMSG);
}

TEST(OutputLog, AdoptRefusesStartAfterEndOrMoreThanCapacity) {
    EXPECT_EQ(adopt(forge(valid_header(10, 9))), -EBADMSG);
    EXPECT_EQ(adopt(forge(valid_header(0, kCap + 1))), -EBADMSG);
    EXPECT_EQ(adopt(forge(valid_header(0, UINT64_MAX))), -EBADMSG);
}

TEST(OutputLog, AdoptRefusesAnUnsealedShrinkableOrWriteSealedMemfd) {
    // All -EBADMSG: not a memfd that create() made.
    EXPECT_EQ(adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, 0)), -EBADMSG);
    EXPECT_EQ(
        adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, F_SEAL_GROW | F_SEAL_SEAL)),
        -EBADMSG);  // shrinkable
    EXPECT_EQ(
        adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, F_SEAL_SHRINK | F_SEAL_SEAL)),
        -EBADMSG);  // growable
    EXPECT_EQ(
        adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, F_SEAL_SHRINK | F_SEAL_GROW)),
        -EBADMSG);  // open to a write seal later
    EXPECT_EQ(adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap,
                          kGoodSeals | F_SEAL_FUTURE_WRITE)),
              -EBADMSG);
    EXPECT_EQ(
        adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, kGoodSeals | F_SEAL_WRITE)),
        -EBADMSG);
    // Made without MFD_ALLOW_SEALING: the kernel seals it F_SEAL_SEAL alone, so never sealable.
    EXPECT_EQ(adopt(forge(valid_header(), OutputLog::kHeaderSize + kCap, 0, MFD_CLOEXEC)),
              -EBADMSG);
}

TEST(OutputLog, AdoptRefusesWhatIsNotAMemfdAndPassesOtherErrors) {
    Pipe p;
    EXPECT_EQ(adopt(std::move(p.read)), -EBADMSG);  // cannot carry seals
    EXPECT_EQ(adopt(UniqueFd()), -EBADF);
}

TEST(OutputLog, IdleLogStaysSmall) {
    auto log = make_log(OutputLog::kDefaultCapacity);
    ASSERT_EQ(log->capacity(), OutputLog::kDefaultCapacity);
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    struct stat st {};
    ASSERT_EQ(::fstat(log->fd(), &st), 0);
    // st_blocks counts 512-byte units of what tmpfs has allocated.
    EXPECT_LE(static_cast<std::uint64_t>(st.st_blocks) * 512, OutputLog::kHeaderSize + page);

    // A little output costs the page it lands in, not the ring (nor a huge page).
    log->append(text("$ "));
    ASSERT_EQ(::fstat(log->fd(), &st), 0);
    EXPECT_LE(static_cast<std::uint64_t>(st.st_blocks) * 512, OutputLog::kHeaderSize + 2 * page);
}

// Random appends and pipe reads against a std::deque holding what the log should.
TEST(OutputLog, MatchesADequeModelUnderRandomAppendsAndReads) {
    auto log = make_log();
    Pipe p;
    std::mt19937_64 rng(0x5eed0f0075ull);
    std::deque<std::uint8_t> model;
    std::uint64_t model_end = 0;
    auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    };
    auto random_bytes = [&](std::size_t n) {
        Bytes b(n);
        for (auto& c : b) c = static_cast<std::uint8_t>(rng());
        return b;
    };
    auto feed_model = [&](const Bytes& b) {
        model.insert(model.end(), b.begin(), b.end());
        model_end += b.size();
        while (model.size() > kCap) model.pop_front();
    };

    for (int op = 0; op < 3000; ++op) {
        const auto kind = uniform(0, 9);
        if (kind < 6) {
            // Mostly small, like terminal output; now and then more than the ring.
            const auto size_class = uniform(0, 9);
            const std::size_t n = size_class < 6   ? uniform(0, 256)
                                  : size_class < 9 ? uniform(0, 16384)
                                                   : uniform(0, 2 * kCap + 1000);
            const Bytes b = random_bytes(n);
            log->append(b);
            feed_model(b);
        } else {
            // Through a pipe, drained in reads of random size: short reads into a full ring.
            const Bytes b = random_bytes(uniform(1, 60000));
            p.put(b);
            feed_model(b);
            std::size_t got = 0;
            ssize_t r;
            while ((r = log->read_from(p.read.get(), uniform(1, kCap))) > 0)
                got += static_cast<std::size_t>(r);
            ASSERT_EQ(r, -EAGAIN);
            ASSERT_EQ(got, b.size());
        }
        ASSERT_EQ(log->end(), model_end) << "op " << op;
        ASSERT_EQ(log->start(), model_end - model.size()) << "op " << op;

        // A random view, its offset sometimes outside the held range.
        const std::uint64_t start = log->start();
        const std::uint64_t lo = start > 100 ? start - 100 : 0;
        const std::uint64_t offset = uniform(lo, model_end + 100);
        const std::size_t max = uniform(0, kCap + 100);
        const std::uint64_t at = std::clamp(offset, start, model_end);
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(model_end - at, max));
        const auto from = model.begin() + static_cast<std::ptrdiff_t>(at - start);
        ASSERT_EQ(joined(log->view(offset, max)),
                  Bytes(from, from + static_cast<std::ptrdiff_t>(n)))
            << "op " << op << " offset " << offset << " max " << max;

        if (op % 100 == 0) {
            ASSERT_EQ(log->copy(0, SIZE_MAX), Bytes(model.begin(), model.end())) << "op " << op;
        }
    }

    std::unique_ptr<OutputLog> adopted;
    ASSERT_EQ(OutputLog::adopt(dup_of(log->fd()), adopted), 0);
    EXPECT_EQ(adopted->start(), log->start());
    EXPECT_EQ(adopted->end(), log->end());
    EXPECT_EQ(adopted->copy(0, SIZE_MAX), Bytes(model.begin(), model.end()));
}

}  // namespace
}  // namespace ptyvisor::server
