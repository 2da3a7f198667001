// condense_file [--budget N] [--keep-escapes | --strip] FILE: FILE's bytes (a terminal's
// output, as recorded by measure.py) through the MCP server's condenser
// (src/cli/mcp/condensed_output.h), fed in 64 KiB pieces as terminal_read feeds it; or, with
// --strip, through strip_terminal_output() alone (escape sequences removed, every "\r" a
// newline), for comparison. The text goes to stdout; one JSON line of figures to stderr.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/mcp/condensed_output.h"

int main(int argc, char** argv) {
    using namespace ptyvisor::cli::mcp;
    CondenseOptions options{.budget = 0};
    std::string path;
    bool strip = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--budget" && i + 1 < argc)
            options.budget = std::strtoull(argv[++i], nullptr, 10);
        else if (arg == "--keep-escapes")
            options.keep_escapes = true;
        else if (arg == "--strip")
            strip = true;
        else
            path = arg;
    }
    std::ifstream file(path, std::ios::binary);
    if (path.empty() || !file) {
        std::cerr << "usage: condense_file [--budget N] [--keep-escapes | --strip] FILE\n";
        return 2;
    }
    if (strip) {
        const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
        const std::string text = strip_terminal_output(bytes, ParseState::Ground, true).text;
        std::cout << text;
        std::cerr << "{\"raw_bytes\": " << bytes.size() << ", \"text_bytes\": " << text.size() << "}\n";
        return 0;
    }
    Condenser condenser(0, options);
    std::vector<char> piece(64 * 1024);
    std::uint64_t raw = 0;
    while (file.read(piece.data(), static_cast<std::streamsize>(piece.size())) || file.gcount() > 0) {
        const auto n = static_cast<std::size_t>(file.gcount());
        condenser.feed(std::string_view(piece.data(), n));
        raw += n;
    }
    const CondensedOutput out = condenser.finish(Ending::Final);
    std::cout << out.text;
    std::cerr << "{\"raw_bytes\": " << raw << ", \"text_bytes\": " << out.text.size()
              << ", \"truncated\": " << (out.truncated ? "true" : "false") << ", \"omitted_bytes\": " << out.omitted_bytes
              << "}\n";
    return 0;
}
