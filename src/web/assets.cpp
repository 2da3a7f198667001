#include "web/assets.h"

#include <algorithm>

namespace ptyvisor::web {

const Asset* find_asset(std::string_view name) {
    const auto all = embedded_assets();
    const auto it = std::lower_bound(all.begin(), all.end(), name,
                                     [](const Asset& a, std::string_view n) { return a.name < n; });
    if (it == all.end() || it->name != name) return nullptr;
    return &*it;
}

}  // namespace ptyvisor::web
