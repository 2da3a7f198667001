#include "cli/mcp/condensed_output.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <optional>
#include <vector>

#include "common/utf8.h"

namespace ptyvisor::cli::mcp {
namespace {

// A piece of the text and the log offset where it begins. `text` ends with "\n" unless it is
// the last piece, or a part of a line that wrapped.
struct Segment {
    std::string text;
    std::uint64_t start = 0;
};

void append_utf8(char32_t c, std::string& out) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// The first parameter of a CSI sequence ("12;3" gives 12), or `otherwise` when there is none
// or it is 0 (which means the default for cursor movement).
std::size_t first_parameter(std::string_view parameters, std::size_t otherwise) {
    std::size_t n = 0;
    const auto end = parameters.data() + parameters.size();
    const auto [ptr, ec] = std::from_chars(parameters.data(), end, n);
    if (ec != std::errc() || n == 0) return otherwise;
    return std::min(n, kMaxColumns);
}

std::string marker_line(std::uint64_t text_bytes, std::uint64_t from, std::uint64_t to) {
    const std::string f = std::to_string(from), t = std::to_string(to);
    return "[... " + std::to_string(text_bytes) + " bytes omitted (" + std::to_string(to - from) +
           " bytes of log, offsets " + f + ".." + t + "); read them with terminal_read offset=" + f + " to=" + t +
           " ...]\n";
}

}  // namespace

// Fits segments into the budget: the first up to 40% of it (the head) are kept as they come;
// the rest pass through the tail, which lets go of its oldest while it holds more than what
// the head left. What was let go is one range of the log, between head and tail. In order,
// the head has all of the budget and the first segment that does not fit stops it.
class Condenser::Budget {
  public:
    Budget(std::size_t budget, bool in_order)
        : budget_(budget), head_budget_(in_order ? budget : budget / 5 * 2), in_order_(in_order) {}

    void add(Segment segment) {
        if (segment.text.empty() || stopped_at_) return;
        if (in_order_ && budget_ != 0 && !head_.empty() && head_bytes_ + segment.text.size() > budget_) {
            stopped_at_ = segment.start;
            return;
        }
        if (budget_ == 0 || in_order_ || (head_open_ && head_bytes_ + segment.text.size() <= head_budget_)) {
            head_bytes_ += segment.text.size();
            head_.push_back(std::move(segment));
            return;
        }
        head_open_ = false;
        tail_bytes_ += segment.text.size();
        tail_.push_back(std::move(segment));
        while (tail_bytes_ > budget_ - head_bytes_) drop_tail_front();
    }

    // The result; `end`: the log offset the segments account for up to.
    CondensedOutput finish(std::uint64_t end) {
        CondensedOutput out;
        std::string marker;
        while (dropped_any_) {
            out.omitted_to = tail_.empty() ? end : tail_.front().start;
            marker = marker_line(omitted_bytes_, omitted_from_, out.omitted_to);
            if (head_bytes_ + tail_bytes_ + marker.size() <= budget_ || (head_.empty() && tail_.empty())) break;
            if (!tail_.empty()) {
                drop_tail_front();
            } else {
                omitted_from_ = head_.back().start;
                omitted_bytes_ += head_.back().text.size();
                head_bytes_ -= head_.back().text.size();
                head_.pop_back();
            }
        }
        out.text.reserve(head_bytes_ + marker.size() + tail_bytes_ + 1);
        for (const auto& s : head_) out.text += s.text;
        if (dropped_any_) {
            if (!out.text.empty() && out.text.back() != '\n') out.text += '\n';  // a wrapped line's part
            out.text += marker;
            out.truncated = true;
            out.omitted_bytes = omitted_bytes_;
            out.omitted_from = omitted_from_;
        }
        for (const auto& s : tail_) out.text += s.text;
        return out;
    }

    // In order: where the first segment that did not fit begins.
    [[nodiscard]] std::optional<std::uint64_t> stopped_at() const { return stopped_at_; }

  private:
    void drop_tail_front() {
        const Segment& s = tail_.front();
        if (!dropped_any_) omitted_from_ = s.start;
        dropped_any_ = true;
        omitted_bytes_ += s.text.size();
        tail_bytes_ -= s.text.size();
        tail_.pop_front();
    }

    std::size_t budget_;
    std::size_t head_budget_;
    bool in_order_;
    std::optional<std::uint64_t> stopped_at_;
    std::vector<Segment> head_;
    std::size_t head_bytes_ = 0;
    bool head_open_ = true;
    std::deque<Segment> tail_;
    std::size_t tail_bytes_ = 0;
    bool dropped_any_ = false;
    std::uint64_t omitted_bytes_ = 0;
    std::uint64_t omitted_from_ = 0;
};

class Condenser::Lines {
  public:
    virtual ~Lines() = default;
    // Parses `bytes`, which begin at log offset `base` in `state`; the bytes consumed (the
    // rest is held back, to come again in front of the next piece).
    virtual std::size_t parse(std::string_view bytes, std::uint64_t base, ParseState& state, bool final) = 0;
    // Hands every line left to the budget, but what `ending` holds back; the log offset the
    // text accounts for up to, given that everything before `parsed_to` was parsed.
    virtual std::uint64_t flush(Ending ending, std::uint64_t parsed_to) = 0;
};

namespace {

// The lines the terminal shows: the last kLiveRows of them editable, as the cursor moves.
class ShownLines final : public Condenser::Lines, private TerminalEvents {
  public:
    ShownLines(std::uint64_t start, std::size_t width, Condenser::Budget& budget) : budget_(budget), width_(width) {
        rows_.push_back({{}, start});
    }

    std::size_t parse(std::string_view bytes, std::uint64_t base, ParseState& state, bool final) override {
        base_ = base;
        const TerminalText parsed = parse_terminal_output(bytes, state, final, *this);
        state = parsed.state;
        return parsed.consumed;
    }

    std::uint64_t flush(Ending ending, std::uint64_t parsed_to) override {
        while (rows_.size() > 1) commit_first(true);
        if (ending == Ending::Cut && committed_ > 0) return rows_.front().start;  // the next read has it whole
        std::string last = row_text(rows_.front());
        if (!last.empty()) budget_.add({std::move(last), rows_.front().start});
        rows_.clear();
        return parsed_to;
    }

  private:
    struct Row {
        std::u32string cells;
        std::uint64_t start;
    };

    void character(std::string_view utf8, std::size_t at) override {
        if (away_) return;
        if (col_ >= width_) line_feed(base_ + at);  // wraps
        const char32_t c = utf8::next(utf8).code_point;
        auto& cells = rows_[row_].cells;
        if (col_ < cells.size()) {
            cells[col_] = c;
        } else {
            cells.resize(col_, U' ');
            cells.push_back(c);
        }
        ++col_;
    }

    bool control(char c, std::size_t at) override {
        if (away_ && c != '\n') return true;
        away_ = false;
        switch (c) {
            case '\n':
                line_feed(base_ + at + 1);
                break;
            case '\r':
                col_ = 0;
                break;
            case '\b':
                if (col_ > 0) --col_;
                break;
            case '\t':
                col_ = std::min((col_ / 8 + 1) * 8, width_);
                break;
            default:
                break;  // BEL, shift-in/out...: nothing shows
        }
        return true;
    }

    void csi(std::string_view parameters, char final_byte, std::size_t) override {
        if (!parameters.empty() && (parameters[0] < '0' || parameters[0] > ';')) return;  // private (ESC[?25l...)
        if (away_ && final_byte != 'u') return;
        auto& cells = rows_[row_].cells;
        const std::size_t n = first_parameter(parameters, 1);
        const std::size_t mode = first_parameter(parameters, 0);
        switch (final_byte) {
            case 'K':  // erase in line
                if (mode == 0 && col_ < cells.size()) cells.resize(col_);
                if (mode == 1) std::fill_n(cells.begin(), std::min(col_ + 1, cells.size()), U' ');
                if (mode == 2) cells.clear();
                break;
            case 'J':  // erase below (the whole screen's erasure is not followed: its lines stay)
                if (mode == 0) {
                    if (col_ < cells.size()) cells.resize(col_);
                    rows_.resize(row_ + 1);
                }
                break;
            case 'A':
                up(n);
                break;
            case 'F':
                up(n);
                col_ = 0;
                break;
            case 'B':
                down(n);
                break;
            case 'E':
                down(n);
                col_ = 0;
                break;
            case 'C':
                col_ = std::min(col_ + n, width_);
                break;
            case 'D':
                col_ -= std::min(n, col_);
                break;
            case 'G':
                col_ = std::min(n - 1, width_);
                break;
            case 's':
                if (parameters.empty()) save();
                break;
            case 'u':
                if (parameters.empty()) restore();
                break;
            case 'H':
            case 'f':
            case 'd':
                // An absolute position between a save and its restore draws a status line
                // elsewhere on the screen (apt's progress bar): not part of the stream.
                away_ = save_pending_;
                break;
            default:
                break;  // colours, modes, scroll regions, absolute positions
        }
    }

    void escape(char byte, std::size_t at) override {
        if (byte == '8') restore();
        if (away_) return;
        if (byte == '7') save();
        if (byte == 'M') up(1);  // reverse index
        if (byte == 'E') line_feed(base_ + at + 2);  // next line
    }

    void line_feed(std::uint64_t next_start) {
        col_ = 0;
        if (row_ + 1 < rows_.size()) {
            ++row_;
            return;
        }
        rows_.push_back({{}, next_start});
        ++row_;
        if (rows_.size() > kLiveRows) {
            commit_first(true);
            --row_;
        }
    }

    void up(std::size_t n) { row_ -= std::min(n, row_); }
    void down(std::size_t n) { row_ = std::min(row_ + n, rows_.size() - 1); }

    void save() {
        saved_row_ = committed_ + row_;
        saved_col_ = col_;
        save_pending_ = true;
    }
    void restore() {
        away_ = false;
        save_pending_ = false;
        row_ = saved_row_ < committed_ ? 0 : std::min<std::uint64_t>(saved_row_ - committed_, rows_.size() - 1);
        col_ = saved_col_;
    }

    static std::string row_text(const Row& row) {
        std::size_t length = row.cells.size();
        while (length > 0 && row.cells[length - 1] == U' ') --length;
        std::string text;
        text.reserve(length);
        for (std::size_t i = 0; i < length; ++i) append_utf8(row.cells[i], text);
        return text;
    }

    void commit_first(bool newline) {
        std::string text = row_text(rows_.front());
        if (newline) text += '\n';
        budget_.add({std::move(text), rows_.front().start});
        rows_.pop_front();
        ++committed_;
    }

    Condenser::Budget& budget_;
    std::size_t width_;
    std::deque<Row> rows_;  // never empty until flush()
    std::size_t row_ = 0;   // the cursor, in rows_
    std::size_t col_ = 0;
    std::uint64_t committed_ = 0;  // rows handed to the budget
    std::uint64_t saved_row_ = 0;  // counted from the first row ever (committed_ + row_)
    std::size_t saved_col_ = 0;
    bool save_pending_ = false;  // saved, not restored yet
    bool away_ = false;          // drawing elsewhere until the restore (or a newline)
    std::uint64_t base_ = 0;  // the log offset of the chunk being parsed
};

// The bytes as they are, in lines ended by "\n" (or cut at `width` bytes, 4 at least).
class RawLines final : public Condenser::Lines {
  public:
    RawLines(std::uint64_t start, std::size_t width, Condenser::Budget& budget)
        : budget_(budget), width_(std::max<std::size_t>(width, 4)), first_start_(start), start_(start) {}

    std::size_t parse(std::string_view bytes, std::uint64_t, ParseState&, bool) override {
        const std::size_t size = bytes.size();
        while (!bytes.empty()) {
            const auto newline = bytes.find('\n');
            const std::size_t take = std::min(newline == std::string_view::npos ? bytes.size() : newline + 1,
                                              width_ - line_.size());
            line_.append(bytes.substr(0, take));
            bytes.remove_prefix(take);
            if (line_.back() == '\n') {
                emit(line_.size());
            } else if (line_.size() == width_) {
                emit(before_last_character());
            }
        }
        return size;  // all taken: a character split at the end waits in line_
    }

    std::uint64_t flush(Ending ending, std::uint64_t) override {
        if (ending == Ending::Cut && start_ > first_start_) return start_;  // the next read has it whole
        TerminalText last = raw_terminal_output(line_, ending == Ending::Final);
        budget_.add({std::move(last.text), start_});
        return start_ + last.consumed;
    }

  private:
    // Where the last multi-byte character of line_ begins (it may be cut: the next line
    // takes it whole), or line_'s size when it ends in ASCII.
    std::size_t before_last_character() const {
        std::size_t lead = line_.size();
        while (lead > 0 && line_.size() - lead < 4 && (static_cast<unsigned char>(line_[lead - 1]) & 0xC0) == 0x80)
            --lead;
        if (lead > 0 && static_cast<unsigned char>(line_[lead - 1]) >= 0xC0) return lead - 1;
        return line_.size();
    }

    void emit(std::size_t length) {
        budget_.add({utf8::replace_invalid(std::string_view(line_).substr(0, length)), start_});
        line_.erase(0, length);
        start_ += length;
    }

    Condenser::Budget& budget_;
    std::size_t width_;
    std::string line_;
    std::uint64_t first_start_;
    std::uint64_t start_;  // the log offset of line_[0]
};

}  // namespace

std::size_t line_width(const CondenseOptions& options) {
    if (!options.in_order || options.budget == 0) return kMaxColumns;
    return std::clamp<std::size_t>(options.budget / 4, 1, kMaxColumns);
}

Condenser::Condenser(std::uint64_t raw_offset, const CondenseOptions& options)
    : options_(options),
      next_offset_(raw_offset),
      state_(options.state),
      budget_(std::make_unique<Budget>(options.budget, options.in_order)) {
    if (options.keep_escapes)
        lines_ = std::make_unique<RawLines>(raw_offset, line_width(options), *budget_);
    else
        lines_ = std::make_unique<ShownLines>(raw_offset, line_width(options), *budget_);
}

Condenser::~Condenser() = default;

void Condenser::feed(std::string_view piece) {
    if (piece.empty()) return;
    if (options_.keep_escapes) {
        lines_->parse(piece, next_offset_, state_, false);
        next_offset_ += piece.size();
        return;
    }
    std::string joined;
    std::string_view bytes = piece;
    if (!held_.empty()) {
        joined = held_;
        joined += piece;
        bytes = joined;
    }
    const std::size_t consumed = lines_->parse(bytes, next_offset_, state_, false);
    next_offset_ += consumed;
    held_.assign(bytes.substr(consumed));
}

CondensedOutput Condenser::finish(Ending ending) {
    if (ending == Ending::Final) {
        if (!held_.empty()) next_offset_ += lines_->parse(held_, next_offset_, state_, true);
        held_.clear();
        state_ = ParseState::Ground;
    }
    std::uint64_t consumed_to = lines_->flush(ending, next_offset_);
    if (consumed_to != next_offset_) state_ = ParseState::Ground;  // at a line's start
    if (const auto stopped = budget_->stopped_at(); stopped && *stopped < consumed_to) {
        consumed_to = *stopped;
        state_ = ParseState::Ground;
    }
    CondensedOutput out = budget_->finish(consumed_to);
    out.consumed_to = consumed_to;
    out.state = state_;
    return out;
}

CondensedOutput condense(std::string_view raw, std::uint64_t raw_offset, const CondenseOptions& options) {
    Condenser condenser(raw_offset, options);
    condenser.feed(raw);
    return condenser.finish(Ending::Final);
}

}  // namespace ptyvisor::cli::mcp
