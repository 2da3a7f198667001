#include "screen/worker.h"

#include <sys/mman.h>

#include <atomic>

namespace ptyvisor::screen {
namespace {

constexpr std::size_t kLogHeaderSize = 4096;   // server/output_log.h
constexpr std::size_t kLogStartField = 24;     // its header's u64 start
constexpr std::size_t kChunk = 64 * 1024;

}  // namespace

Worker::Session::~Session() {
    if (map) ::munmap(const_cast<std::uint8_t*>(map), map_length);
}

bool Worker::handle(MessageType type, std::span<const std::uint8_t> body, std::vector<UniqueFd>& fds) {
    Reader r(body);
    switch (type) {
        case MessageType::Open: return open(r, fds);
        case MessageType::Advance: return advance(r);
        case MessageType::Resize: return resize(r);
        case MessageType::Close: {
            std::uint32_t id = 0;
            if (!r.get(id) || !r.done()) return false;
            sessions_.erase(id);
            return true;
        }
        case MessageType::Snapshot: return snapshot(r);
        default: return false;
    }
}

bool Worker::open(Reader& r, std::vector<UniqueFd>& fds) {
    std::uint32_t id = 0, scrollback = 0;
    std::uint64_t capacity = 0, from = 0, upto = 0;
    std::uint16_t cols = 0, rows = 0;
    if (!r.get(id) || !r.get(capacity) || !r.get(from) || !r.get(upto) || !r.get(cols) || !r.get(rows) ||
        !r.get(scrollback) || !r.done() || fds.empty() || capacity == 0 || capacity > (1ull << 30) || upto < from)
        return false;
    UniqueFd memfd = std::move(fds.front());
    fds.erase(fds.begin());
    auto s = std::make_unique<Session>();
    s->map_length = kLogHeaderSize + capacity;
    void* map = ::mmap(nullptr, s->map_length, PROT_READ, MAP_SHARED, memfd.get(), 0);
    if (map == MAP_FAILED) return false;
    s->map = static_cast<const std::uint8_t*>(map);
    s->capacity = capacity;
    s->processed = from;
    s->quiet_until = upto;
    s->emulator = std::make_unique<Emulator>(cols, rows, scrollback);
    Session& session = *s;
    sessions_[id] = std::move(s);
    process(session, upto);
    session.emulator->take_answers();  // replayed history is not asked again
    // Acknowledged like an Advance: the daemon's deadline covers each replay on its own.
    send_advanced(id, session, {});
    return true;
}

bool Worker::advance(Reader& r) {
    std::uint32_t id = 0;
    std::uint64_t end = 0;
    if (!r.get(id) || !r.get(end) || !r.done()) return false;
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return true;  // closed meanwhile
    Session& s = *it->second;
    process(s, end);
    send_advanced(id, s, s.emulator->take_answers());
    return true;
}

void Worker::send_advanced(std::uint32_t id, Session& s, std::string_view answers) {
    for (const server::ShellMark& mark : s.marks)
        send_(Writer(MessageType::Mark)
                  .put(id)
                  .put(static_cast<std::uint8_t>(mark.kind))
                  .put(mark.offset)
                  .put(std::int32_t{mark.exit_code.value_or(-1)})
                  .put_bytes(mark.text)
                  .finish());
    s.marks.clear();
    send_(Writer(MessageType::Advanced).put(id).put(s.processed).put_bytes(answers).finish());
}

bool Worker::resize(Reader& r) {
    std::uint32_t id = 0;
    std::uint64_t at = 0;
    std::uint16_t cols = 0, rows = 0;
    if (!r.get(id) || !r.get(at) || !r.get(cols) || !r.get(rows) || !r.done()) return false;
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return true;
    process(*it->second, at);
    it->second->emulator->resize(cols, rows);
    return true;
}

bool Worker::snapshot(Reader& r) {
    std::uint32_t ticket = 0, id = 0, scrollback = 0;
    std::uint64_t upto = 0;
    std::uint8_t attributes = 0;
    if (!r.get(ticket) || !r.get(id) || !r.get(upto) || !r.get(scrollback) || !r.get(attributes) || !r.done())
        return false;
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    Session& s = *it->second;
    process(s, upto);
    auto reply = s.emulator->snapshot(scrollback, attributes != 0);
    reply.offset = s.processed;
    std::string text = protocol::encode(reply);
    // Past the reply's bound (a 1000x1000 screen of changing colours): the attributes are left
    // out, then the scrollback, rather than a message the daemon must refuse (and with it
    // this worker, which every session's screen shares).
    if (text.size() > protocol::kMaxScreenPayloadSize && reply.attributes && !reply.attributes->empty()) {
        reply.attributes->clear();
        text = protocol::encode(reply);
    }
    if (text.size() > protocol::kMaxScreenPayloadSize && !reply.scrollback.empty()) {
        reply.scrollback.clear();
        text = protocol::encode(reply);
    }
    send_(Writer(MessageType::Screen).put(ticket).put(id).put_bytes(text).finish());
    return true;
}

std::uint64_t Worker::log_start(const Session& s) const {
    std::atomic_thread_fence(std::memory_order_acquire);
    std::uint64_t start = 0;
    std::memcpy(&start, s.map + kLogStartField, sizeof start);
    return start;
}

void Worker::process(Session& s, std::uint64_t upto) {
    while (s.processed < upto) {
        // Bytes the daemon has overwritten are gone: skip to the oldest still held.
        s.processed = std::max(s.processed, log_start(s));
        if (s.processed >= upto) break;
        const std::uint64_t at = s.processed;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(upto - at, kChunk));
        chunk_.resize(n);
        const std::size_t pos = at % s.capacity;
        const std::size_t first = std::min(n, s.capacity - pos);
        const std::uint8_t* ring = s.map + kLogHeaderSize;
        std::memcpy(chunk_.data(), ring + pos, first);
        std::memcpy(chunk_.data() + first, ring, n - first);
        // A write that overwrote any of these bytes while we copied raised the log's start
        // past them first (output_log.h): only what is still at or above start is good.
        const std::uint64_t start = log_start(s);
        if (start > at) continue;
        s.emulator->feed(chunk_);
        s.scanner.scan(chunk_, at, found_);  // a gap (skipped bytes) resets it
        for (auto& mark : found_) {
            if (s.marks.size() == kMaxMarksPerReply) s.marks.pop_front();
            s.marks.push_back(std::move(mark));
        }
        found_.clear();
        s.processed = at + n;
        if (s.processed <= s.quiet_until) s.emulator->take_answers();
    }
}

}  // namespace ptyvisor::screen
