#include "protocol/screen_payloads.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "protocol/json_members.h"
#include "protocol/session_payloads.h"

namespace ptyvisor::protocol {
namespace {

using nlohmann::json;

// Code points one cell may hold (a base and its combining marks), times UTF-8's 4 bytes.
constexpr std::size_t kMaxBytesPerCell = 6 * 4;

using json_members::dump;
using json_members::fail;
using json_members::MemberReader;
using json_members::parse_object;

bool get_uint(const json& o, const char* key, std::uint64_t hi, std::uint64_t& out, std::string& why) {
    return MemberReader{o, why}.u64(key, out, hi);
}

bool get_bool(const json& o, const char* key, bool& out, std::string& why, bool required = true) {
    return MemberReader{o, why}.boolean(key, out, required);
}

// A line of screen text: a string of at most max_bytes, no control characters (the
// emulator stores none; one here would be an injection into the reader's terminal).
bool is_screen_text(const json& v, std::size_t max_bytes) {
    if (!v.is_string()) return false;
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > max_bytes) return false;
    return std::none_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
}

bool get_lines(const json& o, const char* key, std::size_t min_count, std::size_t max_count, std::size_t max_bytes,
               std::vector<std::string>& out, std::string& why) {
    const auto it = o.find(key);
    if (it == o.end()) return fail(why, key, "is missing");
    if (!it->is_array()) return fail(why, key, "must be an array");
    if (it->size() < min_count || it->size() > max_count) return fail(why, key, "has the wrong number of lines");
    for (const auto& line : *it) {
        if (!is_screen_text(line, max_bytes)) return fail(why, key, "holds a line that is not screen text");
        out.push_back(line.get<std::string>());
    }
    return true;
}

json colour_json(const Colour& c) {
    switch (c.kind) {
        case Colour::Kind::Default: return nullptr;
        case Colour::Kind::Indexed: return c.value;
        case Colour::Kind::Rgb: {
            static constexpr char kHex[] = "0123456789abcdef";
            std::string s = "#";
            for (int shift = 20; shift >= 0; shift -= 4) s += kHex[(c.value >> shift) & 0xf];
            return s;
        }
    }
    return nullptr;
}

bool colour_of(const json& v, Colour& out) {
    if (v.is_null()) return out = {}, true;
    if (v.is_number_unsigned() && v.get<std::uint64_t>() <= 255)
        return out = {Colour::Kind::Indexed, v.get<std::uint32_t>()}, true;
    if (!v.is_string()) return false;
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() != 7 || s[0] != '#') return false;
    std::uint32_t value = 0;
    for (std::size_t i = 1; i < 7; ++i) {
        const char c = s[i];
        std::uint32_t d = 0;
        if (c >= '0' && c <= '9') d = static_cast<std::uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f') d = static_cast<std::uint32_t>(c - 'a' + 10);
        else return false;
        value = value << 4 | d;
    }
    out = {Colour::Kind::Rgb, value};
    return true;
}

json run_json(const AttributeRun& r) {
    json j{{"row", r.row}, {"col", r.col}, {"width", r.width}};
    if (r.bold) j["bold"] = true;
    if (r.italic) j["italic"] = true;
    if (r.blink) j["blink"] = true;
    if (r.reverse) j["reverse"] = true;
    if (r.strike) j["strike"] = true;
    if (r.underline) j["underline"] = r.underline;
    if (r.fg.kind != Colour::Kind::Default) j["fg"] = colour_json(r.fg);
    if (r.bg.kind != Colour::Kind::Default) j["bg"] = colour_json(r.bg);
    return j;
}

bool read_run(const json& j, std::uint16_t cols, std::uint16_t rows, AttributeRun& r, std::string& why) {
    static const char* const kKeys[] = {"row", "col", "width", "bold", "italic", "blink",
                                        "reverse", "strike", "underline", "fg", "bg"};
    if (!j.is_object()) return fail(why, "attributes", "holds a run that is not an object");
    for (const auto& item : j.items()) {
        const std::string& key = item.key();  // (a structured binding: clang 14 cannot capture it)
        if (std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }) == std::end(kKeys))
            return fail(why, "attributes", "holds a run with an unknown member");
    }
    std::uint64_t row = 0, col = 0, width = 0, underline = 0;
    if (!get_uint(j, "row", rows - 1u, row, why) || !get_uint(j, "col", cols - 1u, col, why) ||
        !get_uint(j, "width", cols, width, why))
        return false;
    if (width == 0 || col + width > cols) return fail(why, "width", "is out of range");
    r.row = static_cast<std::uint16_t>(row);
    r.col = static_cast<std::uint16_t>(col);
    r.width = static_cast<std::uint16_t>(width);
    if (!get_bool(j, "bold", r.bold, why, false) || !get_bool(j, "italic", r.italic, why, false) ||
        !get_bool(j, "blink", r.blink, why, false) || !get_bool(j, "reverse", r.reverse, why, false) ||
        !get_bool(j, "strike", r.strike, why, false))
        return false;
    if (j.contains("underline")) {
        if (!get_uint(j, "underline", 3, underline, why)) return false;
        r.underline = static_cast<std::uint8_t>(underline);
    }
    if (j.contains("fg") && !colour_of(j["fg"], r.fg)) return fail(why, "fg", "is not a colour");
    if (j.contains("bg") && !colour_of(j["bg"], r.bg)) return fail(why, "bg", "is not a colour");
    return true;
}

}  // namespace

std::string encode(const SnapshotRequest& v) {
    return dump({{"id", v.id}, {"scrollback", v.scrollback}, {"attributes", v.attributes}});
}

std::string encode(const ScreenReply& v) {
    json j{{"id", v.id},
           {"cols", v.cols},
           {"rows", v.rows},
           {"cursor", {{"row", v.cursor_row}, {"col", v.cursor_col}, {"visible", v.cursor_visible}}},
           {"alternate", v.alternate},
           {"title", v.title},
           {"offset", v.offset},
           {"lines", v.lines},
           {"scrollback", v.scrollback}};
    if (v.attributes) {
        json runs = json::array();
        for (const auto& r : *v.attributes) runs.push_back(run_json(r));
        j["attributes"] = std::move(runs);
    }
    return dump(j);
}

Decoded<SnapshotRequest> decode_snapshot(std::string_view text) {
    std::string why;
    const auto o = parse_object(text, 0, why);
    if (!o) return Decoded<SnapshotRequest>::fail(why);
    for (const auto& [key, value] : o->items())
        if (key != "id" && key != "scrollback" && key != "attributes")
            return Decoded<SnapshotRequest>::fail("'" + key + "' is not a member of SNAPSHOT");
    SnapshotRequest v;
    const auto id = o->find("id");
    if (id == o->end() || !id->is_string() || !is_session_id(id->get<std::string>()))
        return Decoded<SnapshotRequest>::fail("'id' must be 32 lowercase hex digits");
    v.id = id->get<std::string>();
    if (o->contains("scrollback")) {
        std::uint64_t n = 0;
        if (!get_uint(*o, "scrollback", kMaxScrollbackLines, n, why)) return Decoded<SnapshotRequest>::fail(why);
        v.scrollback = static_cast<std::uint32_t>(n);
    }
    if (!get_bool(*o, "attributes", v.attributes, why, false)) return Decoded<SnapshotRequest>::fail(why);
    return {std::move(v), {}};
}

Decoded<ScreenReply> decode_screen(std::string_view text, const ScreenBounds& b) {
    std::string why;
    const auto o = parse_object(text, 2, why);
    if (!o) return Decoded<ScreenReply>::fail(why);
    ScreenReply v;
    const auto bad = [&] { return Decoded<ScreenReply>::fail(why); };
    std::uint64_t cols = 0, rows = 0, n = 0;
    if (!get_uint(*o, "cols", b.cols ? b.cols : 0xffff, cols, why) || !get_uint(*o, "rows", b.rows ? b.rows : 0xffff, rows, why))
        return bad();
    if (cols == 0 || rows == 0 || cols * rows > kMaxScreenCells) return Decoded<ScreenReply>::fail("the size is out of range");
    if ((b.cols && cols != b.cols) || (b.rows && rows != b.rows))
        return Decoded<ScreenReply>::fail("the size is not the session's");
    v.cols = static_cast<std::uint16_t>(cols);
    v.rows = static_cast<std::uint16_t>(rows);
    const auto id = o->find("id");
    if (id != o->end() && id->is_string() && id->get_ref<const std::string&>().size() <= kSessionIdLength)
        v.id = id->get<std::string>();
    const auto cursor = o->find("cursor");
    if (cursor == o->end() || !cursor->is_object()) return Decoded<ScreenReply>::fail("'cursor' must be an object");
    if (!get_uint(*cursor, "row", rows - 1, n, why)) return bad();
    v.cursor_row = static_cast<std::uint16_t>(n);
    if (!get_uint(*cursor, "col", cols - 1, n, why)) return bad();
    v.cursor_col = static_cast<std::uint16_t>(n);
    if (!get_bool(*cursor, "visible", v.cursor_visible, why) || !get_bool(*o, "alternate", v.alternate, why)) return bad();
    const auto title = o->find("title");
    if (title == o->end() || !is_screen_text(*title, kMaxTitleLength)) return Decoded<ScreenReply>::fail("'title' is not screen text");
    v.title = title->get<std::string>();
    if (!get_uint(*o, "offset", UINT64_MAX, v.offset, why)) return bad();
    const std::size_t max_bytes = cols * kMaxBytesPerCell;
    if (!get_lines(*o, "lines", rows, rows, max_bytes, v.lines, why) ||
        !get_lines(*o, "scrollback", 0, b.scrollback, std::size_t{kMaxScreenSide} * kMaxBytesPerCell, v.scrollback, why))
        return bad();
    const auto attributes = o->find("attributes");
    if (attributes != o->end()) {
        if (!b.attributes) return Decoded<ScreenReply>::fail("'attributes' was not asked for");
        if (!attributes->is_array() || attributes->size() > cols * rows)
            return Decoded<ScreenReply>::fail("'attributes' must be an array of at most one run per cell");
        std::vector<AttributeRun> runs;
        for (const auto& j : *attributes) {
            AttributeRun r;
            if (!read_run(j, v.cols, v.rows, r, why)) return bad();
            runs.push_back(r);
        }
        v.attributes = std::move(runs);
    }
    return {std::move(v), {}};
}

}  // namespace ptyvisor::protocol
