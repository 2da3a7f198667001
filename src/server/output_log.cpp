#include "server/output_log.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

namespace ptyvisor::server {

// The header page's first bytes. Host byte order: the memfd never leaves this machine.
struct OutputLog::Header {
    char magic[8];
    std::uint32_t version;
    std::uint32_t reserved;  // zero; adopt() refuses anything else, room for a later layout
    std::uint64_t capacity;
    std::uint64_t start;
    std::uint64_t end;
};

namespace {

constexpr char kMagic[8] = {'P', 'T', 'Y', 'V', 'L', 'O', 'G', '1'};

// SHRINK: nobody holding the fd can cut the file under our mapping (SIGBUS on the next write).
// GROW: its size is its layout, checked by adopt(). SEAL: nobody can add F_SEAL_WRITE or
// F_SEAL_FUTURE_WRITE later and fail the next daemon's writable mmap.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// NAME_MAX less the "memfd:" prefix the kernel adds; a longer name is EINVAL.
constexpr std::size_t kMaxNameLength = 249;

std::size_t page_size() {
    const long page = ::sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<std::size_t>(page) : 4096;
}

// Stores a header field so that neither the compiler nor the CPU moves a ring write across
// it: reserve() needs the store before the writes that follow, commit() after those before.
void publish(std::uint64_t& field, std::uint64_t value) {
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<std::uint64_t>(field).store(value, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
}

std::uint64_t peek(std::uint64_t& field) {
    return std::atomic_ref<std::uint64_t>(field).load(std::memory_order_relaxed);
}

}  // namespace

OutputLog::Header& OutputLog::header() const {
    static_assert(sizeof(Header) == 40 && offsetof(Header, version) == 8 &&
                  offsetof(Header, capacity) == 16 && offsetof(Header, start) == 24 &&
                  offsetof(Header, end) == 32);
    static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
    // map_ is page-aligned (mmap), so the u64 fields are naturally aligned for atomic_ref.
    return *reinterpret_cast<Header*>(map_);
}

int OutputLog::create(std::string_view name, std::size_t capacity,
                      std::unique_ptr<OutputLog>& out) {
    const std::size_t page = page_size();
    capacity = std::clamp(capacity, kMinCapacity, kMaxCapacity);
    capacity = (capacity + page - 1) / page * page;

    char memfd_name[kMaxNameLength + 1] = {};
    name.copy(memfd_name, kMaxNameLength);
    UniqueFd memfd(::memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!memfd) return -errno;
    // Sparse: tmpfs allocates a page when it is first written, so an idle session costs its
    // header page, not its capacity.
    if (::ftruncate(memfd.get(), static_cast<off_t>(kHeaderSize + capacity)) < 0) return -errno;
    if (::fcntl(memfd.get(), F_ADD_SEALS, kSeals) < 0) return -errno;

    std::unique_ptr<OutputLog> log;
    if (const int r = map(std::move(memfd), capacity, 0, 0, log); r < 0) return r;
    Header& h = log->header();
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kVersion;
    h.reserved = 0;
    h.capacity = capacity;
    h.start = 0;
    h.end = 0;
    out = std::move(log);
    return 0;
}

int OutputLog::adopt(UniqueFd memfd, std::unique_ptr<OutputLog>& out) {
    // Seals first: once they hold, the size fstat() reports stays true for our mapping.
    const int seals = ::fcntl(memfd.get(), F_GET_SEALS);
    // EINVAL: a file that cannot carry seals (a pipe, a socket, a disk file), so not ours.
    if (seals < 0) return errno == EINVAL ? -EBADMSG : -errno;
    // A write seal would fail our writable shared mapping; refuse it as a foreign file.
    if ((seals & kSeals) != kSeals || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) {
        return -EBADMSG;
    }
    struct stat st {};
    if (::fstat(memfd.get(), &st) < 0) return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(kHeaderSize)) return -EBADMSG;

    // Read into a copy, not through a mapping: checked values cannot change after the check.
    Header h{};
    ssize_t n;
    do n = ::pread(memfd.get(), &h, sizeof h, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (static_cast<std::size_t>(n) != sizeof h) return -EBADMSG;

    const std::size_t page = page_size();
    const bool valid = std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kVersion &&
                       h.reserved == 0 && h.capacity >= kMinCapacity &&
                       h.capacity <= kMaxCapacity && h.capacity % page == 0 &&
                       static_cast<std::uint64_t>(st.st_size) == kHeaderSize + h.capacity &&
                       h.start <= h.end && h.end - h.start <= h.capacity;
    if (!valid) return -EBADMSG;
    return map(std::move(memfd), static_cast<std::size_t>(h.capacity), h.start, h.end, out);
}

int OutputLog::map(UniqueFd memfd, std::size_t capacity, std::uint64_t start, std::uint64_t end,
                   std::unique_ptr<OutputLog>& out) {
    const std::size_t size = kHeaderSize + capacity;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    if (p == MAP_FAILED) return -errno;
    // Where shmem huge pages are on (shmem_enabled=always or within_size), the first write
    // through this mapping would allocate 2 MiB: an idle session must stay at a page or two.
    // Failure (a kernel without THP) changes nothing, so it is ignored.
    (void)::madvise(p, size, MADV_NOHUGEPAGE);
    out.reset(new (std::nothrow)
                  OutputLog(std::move(memfd), static_cast<std::uint8_t*>(p), capacity, start, end));
    if (!out) {
        ::munmap(p, size);
        return -ENOMEM;
    }
    return 0;
}

OutputLog::~OutputLog() { ::munmap(map_, kHeaderSize + capacity_); }

void OutputLog::reserve(std::size_t n) {
    // Writing n bytes at end_ overwrites the ring positions of offsets below end_ + n - capacity.
    const std::uint64_t overwritten = end_ + n > capacity_ ? end_ + n - capacity_ : 0;
    if (overwritten > start_) publish(header().start, overwritten);
}

void OutputLog::commit(std::size_t k) {
    end_ += k;
    if (end_ - start_ > capacity_) start_ = end_ - capacity_;
    // end first: the header's start is still at least reserve()'s, so [start, end) only
    // covers written bytes. Then start, which comes back down where reserve() raised it for
    // bytes that a short read did not overwrite after all.
    Header& h = header();
    if (k > 0) publish(h.end, end_);
    if (peek(h.start) != start_) publish(h.start, start_);
}

void OutputLog::append_chunk(std::span<const std::uint8_t> bytes) {
    const std::size_t k = bytes.size();
    reserve(k);
    const auto pos = static_cast<std::size_t>(end_ % capacity_);
    const std::size_t first = std::min(k, capacity_ - pos);
    std::memcpy(ring() + pos, bytes.data(), first);
    if (k > first) std::memcpy(ring(), bytes.data() + first, k - first);
    commit(k);
}

void OutputLog::append(std::span<const std::uint8_t> bytes) {
    // Data longer than the ring goes in ring-sized pieces, each reserved and committed on its
    // own, so that the header's [start, end) is right between any two stores; a single jump
    // of end past a whole ring has no such order. Only tests append that much.
    while (!bytes.empty()) {
        const auto piece = bytes.first(std::min(bytes.size(), capacity_));
        append_chunk(piece);
        bytes = bytes.subspan(piece.size());
    }
}

ssize_t OutputLog::read_from(int fd, std::size_t max) {
    if (max == 0) return -EINVAL;
    max = std::min(max, capacity_);
    const auto pos = static_cast<std::size_t>(end_ % capacity_);
    const std::size_t first = std::min(max, capacity_ - pos);
    iovec iov[2] = {{ring() + pos, first}, {ring(), max - first}};
    // We learn how much came only afterwards: reserve the most, commit() gives back the rest.
    reserve(max);
    ssize_t n;
    do n = ::readv(fd, iov, max > first ? 2 : 1);
    while (n < 0 && errno == EINTR);
    const int error = errno;
    commit(n > 0 ? static_cast<std::size_t>(n) : 0);
    return n < 0 ? -error : n;
}

OutputLog::View OutputLog::view(std::uint64_t offset, std::size_t max) const {
    offset = std::clamp(offset, start_, end_);
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(end_ - offset, max));
    if (n == 0) return {};
    const auto pos = static_cast<std::size_t>(offset % capacity_);
    const std::size_t first = std::min(n, capacity_ - pos);
    View v;
    v.first = {ring() + pos, first};
    if (n > first) v.second = {ring(), n - first};
    return v;
}

std::vector<std::uint8_t> OutputLog::copy(std::uint64_t offset, std::size_t max) const {
    const View v = view(offset, max);
    std::vector<std::uint8_t> out;
    out.reserve(v.size());
    out.insert(out.end(), v.first.begin(), v.first.end());
    out.insert(out.end(), v.second.begin(), v.second.end());
    return out;
}

}  // namespace ptyvisor::server
