// The screen's library, chosen by measurement (README, "The screen's library"): feeds the
// same bytes (a file, or a generated mix of text, colours, wide characters, cursor motion
// and scrolling) to libvterm and to libtsm, prints each one's throughput, and writes each
// one's screen text to FILE.vterm and FILE.tsm for comparison with tmux's capture-pane
// (bench/screen_libraries.sh does that).
//
//   screen_libraries COLS ROWS INPUT_FILE [REPEAT]
extern "C" {
#include <libtsm.h>
#include <vterm.h>
}

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

void utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) out += static_cast<char>(0xc0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        out += static_cast<char>(0xe0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)),
            out += static_cast<char>(0x80 | (cp & 0x3f));
    else
        out += static_cast<char>(0xf0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f)),
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)), out += static_cast<char>(0x80 | (cp & 0x3f));
}

void trim(std::string& s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
}

std::vector<std::string> vterm_screen(const std::string& input, int cols, int rows, double& seconds, int repeat) {
    VTerm* vt = vterm_new(rows, cols);
    vterm_set_utf8(vt, 1);
    VTermScreen* screen = vterm_obtain_screen(vt);
    vterm_screen_enable_altscreen(screen, 1);
    vterm_screen_reset(screen, 1);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat; ++i) vterm_input_write(vt, input.data(), input.size());
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::string> lines;
    for (int r = 0; r < rows; ++r) {
        std::string line;
        for (int c = 0; c < cols; ++c) {
            VTermScreenCell cell;
            vterm_screen_get_cell(screen, VTermPos{r, c}, &cell);
            if (cell.chars[0] == 0xffffffffu) continue;
            if (cell.chars[0] == 0) line += ' ';
            for (int k = 0; k < VTERM_MAX_CHARS_PER_CELL && cell.chars[k]; ++k) utf8(line, cell.chars[k]);
        }
        trim(line);
        lines.push_back(line);
    }
    vterm_free(vt);
    return lines;
}

struct TsmGrid {
    int cols, rows;
    std::vector<std::vector<std::string>> cells;
};

std::vector<std::string> tsm_screen_text(const std::string& input, int cols, int rows, double& seconds, int repeat) {
    tsm_screen* screen = nullptr;
    tsm_vte* vte = nullptr;
    tsm_screen_new(&screen, nullptr, nullptr);
    tsm_screen_resize(screen, cols, rows);
    tsm_vte_new(&vte, screen, [](tsm_vte*, const char*, size_t, void*) {}, nullptr, nullptr, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat; ++i) tsm_vte_input(vte, input.data(), input.size());
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    TsmGrid grid{cols, rows, std::vector<std::vector<std::string>>(rows, std::vector<std::string>(cols, " "))};
    tsm_screen_draw(
        screen,
        [](tsm_screen*, std::uint64_t, const std::uint32_t* ch, size_t len, unsigned width, unsigned x, unsigned y,
           const tsm_screen_attr*, tsm_age_t, void* data) {
            auto& g = *static_cast<TsmGrid*>(data);
            if (static_cast<int>(y) >= g.rows || static_cast<int>(x) >= g.cols) return 0;
            std::string s;
            for (size_t k = 0; k < len; ++k) utf8(s, ch[k]);
            if (len == 0) s = width == 0 ? "" : " ";
            g.cells[y][x] = s;
            return 0;
        },
        &grid);
    std::vector<std::string> lines;
    for (auto& row : grid.cells) {
        std::string line;
        for (auto& c : row) line += c;
        trim(line);
        lines.push_back(line);
    }
    tsm_vte_unref(vte);
    tsm_screen_unref(screen);
    return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
    std::ofstream out(path);
    for (const auto& l : lines) out << l << '\n';
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::cerr << "usage: screen_libraries COLS ROWS INPUT_FILE [REPEAT]\n";
        return 2;
    }
    const int cols = std::stoi(argv[1]), rows = std::stoi(argv[2]);
    const std::string path = argv[3];
    const int repeat = argc > 4 ? std::stoi(argv[4]) : 1;
    std::ifstream in(path, std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    double tv = 0, tt = 0;
    write_lines(path + ".vterm", vterm_screen(input, cols, rows, tv, 1));
    write_lines(path + ".tsm", tsm_screen_text(input, cols, rows, tt, 1));
    if (repeat > 1) {
        vterm_screen(input, cols, rows, tv, repeat);
        tsm_screen_text(input, cols, rows, tt, repeat);
    }
    const double mb = static_cast<double>(input.size()) * repeat / 1e6;
    std::printf("input %.1f MB (%d x %zu bytes)\nlibvterm %.1f MB/s\nlibtsm   %.1f MB/s\n", mb, repeat, input.size(),
                mb / tv, mb / tt);
    return 0;
}
