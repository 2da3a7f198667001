// The page's files, embedded in the executable at build time (every file under
// console/assets/, by embed_assets.cmake), so that `ptyvisor web` needs nothing on disk.
#pragma once

#include <span>
#include <string_view>

namespace ptyvisor::web {

struct Asset {
    std::string_view name;   // path under console/assets/, '/'-separated: "app.js", "vendor/xterm.js"
    std::string_view bytes;
};

// Sorted by name. Defined in the generated assets_data.cpp.
std::span<const Asset> embedded_assets();

// The file called `name`, or nullptr.
const Asset* find_asset(std::string_view name);

}  // namespace ptyvisor::web
