#include "cli/table.h"

#include <algorithm>

namespace ptyvisor::cli {

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths;
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (widths.size() <= i) widths.push_back(0);
            widths[i] = std::max(widths[i], row[i].size());
        }
    std::string out;
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            out += row[i];
            if (i + 1 < row.size()) out += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        out += '\n';
    }
    return out;
}

}  // namespace ptyvisor::cli
