#include "screen/worker.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>

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
            const auto it = sessions_.find(id);
            if (it != sessions_.end()) {
                if (it->second->emulator) --resident_;
                sessions_.erase(it);
            }
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
    s->quiet_until = upto;
    // Not max'ed with the log's start here: reading the header would cost this process a
    // page table per idle session. A rebuild finds the ring moved on and starts past it.
    s->origin = s->processed = from;
    // Stored as the emulator would clamp them, so that an unchanged size is seen as one.
    s->origin_cols = s->cols = std::clamp<std::uint16_t>(cols, 1, Emulator::kMaxSide);
    s->origin_rows = s->rows = std::clamp<std::uint16_t>(rows, 1, Emulator::kMaxSide);
    s->scrollback = scrollback;
    touch(*s);
    if (const auto old = sessions_.find(id); old != sessions_.end() && old->second->emulator) --resident_;
    Session& session = *s;
    sessions_[id] = std::move(s);
    process(session, upto);
    if (session.emulator) session.emulator->take_answers();  // replayed history is not asked again
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
    touch(s);
    process(s, end);
    send_advanced(id, s, s.emulator ? s.emulator->take_answers() : std::string());
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
    Session& s = *it->second;
    touch(s);
    process(s, at);
    cols = std::clamp<std::uint16_t>(cols, 1, Emulator::kMaxSide);
    rows = std::clamp<std::uint16_t>(rows, 1, Emulator::kMaxSide);
    if (!s.emulator && s.processed == s.origin && s.resizes.empty()) {
        // Nothing shown yet: an emulator made at the new size shows what one resized would
        // (a blank screen, the cursor home), and an idle session stays without one.
        s.origin_cols = s.cols = cols;
        s.origin_rows = s.rows = rows;
        return true;
    }
    emulator(s).resize(cols, rows);
    s.cols = cols;
    s.rows = rows;
    if (s.replayable && s.resizes.size() < kMaxResizeHistory) {
        s.resizes.push_back({s.processed, cols, rows});
    } else {
        s.replayable = false;
        s.resizes = {};
    }
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
    touch(s);
    process(s, upto);
    auto reply = emulator(s).snapshot(scrollback, attributes != 0);
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

bool Worker::copy(const Session& s, std::uint64_t at, std::size_t n) {
    chunk_.resize(n);
    const std::size_t pos = at % s.capacity;
    const std::size_t first = std::min(n, s.capacity - pos);
    const std::uint8_t* ring = s.map + kLogHeaderSize;
    std::memcpy(chunk_.data(), ring + pos, first);
    std::memcpy(chunk_.data() + first, ring, n - first);
    // A write that overwrote any of these bytes while we copied raised the log's start
    // past them first (output_log.h): only what is still at or above start is good.
    return log_start(s) <= at;
}

void Worker::process(Session& s, std::uint64_t upto) {
    while (s.processed < upto) {
        // Bytes the daemon has overwritten are gone: skip to the oldest still held.
        s.processed = std::max(s.processed, log_start(s));
        if (s.processed >= upto) break;
        // Made (or rebuilt) before the copy: a rebuild reuses chunk_.
        Emulator& e = emulator(s);
        const std::uint64_t at = s.processed;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(upto - at, kChunk));
        if (!copy(s, at, n)) continue;
        e.feed(chunk_);
        s.scanner.scan(chunk_, at, found_);  // a gap (skipped bytes) resets it
        for (auto& mark : found_) {
            if (s.marks.size() == kMaxMarksPerReply) s.marks.pop_front();
            s.marks.push_back(std::move(mark));
        }
        found_.clear();
        s.processed = at + n;
        if (s.processed <= s.quiet_until) e.take_answers();
    }
}

bool Worker::replay(const Session& s, Emulator& e, std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t at = from; at < to;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(to - at, kChunk));
        if (!copy(s, at, n)) return false;
        e.feed(chunk_);
        at += n;
    }
    return true;
}

Emulator& Worker::emulator(Session& s) {
    if (s.emulator) return *s.emulator;
    // Its marks were found when the bytes were new; only the screen is rebuilt, and what the
    // replayed bytes asked was answered then.
    auto e = std::make_unique<Emulator>(s.origin_cols, s.origin_rows, s.scrollback);
    bool whole = log_start(s) <= s.origin;
    std::uint64_t at = s.origin;
    for (const SizeChange& change : s.resizes) {
        if (!whole) break;
        whole = replay(s, *e, at, change.at);
        e->resize(change.cols, change.rows);
        at = change.at;
    }
    if (whole) whole = replay(s, *e, at, s.processed);
    if (!whole) {
        // The ring overwrote part of what this screen had seen: what a restarted worker would
        // show (screen_broker.cpp's Open: the log as it is, at the current size). From here
        // on, that is the history a later rebuild replays.
        s.origin = std::min(log_start(s), s.processed);
        s.origin_cols = s.cols;
        s.origin_rows = s.rows;
        s.resizes = {};
        s.replayable = true;
        e = std::make_unique<Emulator>(s.cols, s.rows, s.scrollback);
        for (std::uint64_t from = s.origin; !replay(s, *e, from, s.processed);) {
            from = std::min(log_start(s), s.processed);  // overwritten while we read: again
            s.origin = from;
            e = std::make_unique<Emulator>(s.cols, s.rows, s.scrollback);
        }
    }
    e->take_answers();
    s.emulator = std::move(e);
    ++resident_;
    touched_ = true;
    return *s.emulator;
}

bool Worker::evictable(const Session& s) const {
    // Exact only while the log holds every byte since origin; and only with half the log to
    // spare, so that a burst the worker has not yet seen must be larger than that before a
    // rebuild falls back to a restarted worker's answer.
    return s.emulator && s.replayable && !s.emulator->has_answers() && log_start(s) <= s.origin &&
           s.processed - s.origin <= s.capacity / 2;
}

void Worker::touch(Session& s) {
    s.last_used = Clock::now();
    // A session without an emulator needs no sweep (one made later sets it in emulator()):
    // an idle session's Open or Resize costs the worker no wake-up.
    if (s.emulator) touched_ = true;
}

std::size_t Worker::evict_quiet(Clock::time_point now) {
    std::size_t evicted = 0;
    touched_ = false;
    waiting_ = 0;
    for (auto& [id, s] : sessions_) {
        if (!evictable(*s)) continue;  // its answers go with the next Advance, which touches it
        if (now - s->last_used < kQuietPeriod) {
            ++waiting_;
            continue;
        }
        s->emulator.reset();
        --resident_;
        ++evicted;
    }
    return evicted;
}

}  // namespace ptyvisor::screen
