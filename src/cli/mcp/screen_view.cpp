#include "cli/mcp/screen_view.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace ptyvisor::cli::mcp {
namespace {

std::string colour_text(const protocol::Colour& c) {
    if (c.kind == protocol::Colour::Kind::Indexed) return std::to_string(c.value);
    char rgb[8];
    std::snprintf(rgb, sizeof rgb, "#%06x", static_cast<unsigned>(c.value & 0xffffffu));
    return rgb;
}

std::string run_text(const protocol::AttributeRun& run) {
    std::string text = std::to_string(run.row) + "," + std::to_string(run.col) + " x" + std::to_string(run.width) + ":";
    if (run.bold) text += " bold";
    if (run.italic) text += " italic";
    if (run.blink) text += " blink";
    if (run.reverse) text += " reverse";
    if (run.strike) text += " strike";
    if (run.underline == 1) text += " underline";
    if (run.underline == 2) text += " double-underline";
    if (run.underline == 3) text += " curly-underline";
    if (run.fg.kind != protocol::Colour::Kind::Default) text += " fg=" + colour_text(run.fg);
    if (run.bg.kind != protocol::Colour::Kind::Default) text += " bg=" + colour_text(run.bg);
    return text;
}

// `number` right-aligned in `width` columns, then the separator.
std::string row_label(long number, std::size_t width) {
    std::string digits = std::to_string(number);
    if (digits.size() < width) digits.insert(0, width - digits.size(), ' ');
    return digits + "|";
}

}  // namespace

std::string screen_view_text(const protocol::ScreenReply& s) {
    std::string text;
    text += "size: " + std::to_string(s.cols) + " cols x " + std::to_string(s.rows) + " rows\n";
    text += "cursor: row " + std::to_string(s.cursor_row) + ", col " + std::to_string(s.cursor_col) +
            (s.cursor_visible ? "" : " (hidden)") + "\n";
    text += s.alternate ? "alternate screen: yes (a full-screen program is showing)\n" : "alternate screen: no\n";
    // As a JSON string: a title is the program's text and may hold quotes or odd characters.
    text += "title: " + nlohmann::json(s.title).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    text += "offset: " + std::to_string(s.offset) + "\n";

    // The last row worth printing: those below it are blank.
    std::size_t shown = s.lines.size();
    while (shown > 0 && s.lines[shown - 1].empty()) --shown;
    const long lowest = -static_cast<long>(s.scrollback.size());
    // Every row number of the screen fits the labels' width, so rows line up alike in every
    // snapshot of the same terminal.
    const long highest = s.lines.empty() ? 0 : static_cast<long>(s.lines.size()) - 1;
    const std::size_t width = std::max(std::to_string(lowest).size(), std::to_string(highest).size());
    for (std::size_t i = 0; i < s.scrollback.size(); ++i)
        text += row_label(lowest + static_cast<long>(i), width) + s.scrollback[i] + "\n";
    for (std::size_t row = 0; row < shown; ++row)
        text += row_label(static_cast<long>(row), width) + s.lines[row] + "\n";
    if (shown + 1 == s.lines.size())
        text += "(row " + std::to_string(shown) + " is blank)\n";
    else if (shown < s.lines.size())
        text += "(rows " + std::to_string(shown) + "-" + std::to_string(s.lines.size() - 1) + " are blank)\n";

    if (s.attributes) {
        if (s.attributes->empty()) {
            text += "attributes: none (every cell has the default colours and style)\n";
        } else {
            text += "attributes (row,col xwidth: style; colours are palette numbers or #rrggbb):\n";
            for (const auto& run : *s.attributes) text += run_text(run) + "\n";
        }
    }
    return text;
}

nlohmann::json screen_view_json(const protocol::ScreenReply& screen) {
    return nlohmann::json::parse(protocol::encode(screen));
}

}  // namespace ptyvisor::cli::mcp
