// Columns aligned for a person to read, as `ptyvisor status` and `ptyvisor ls` print them.
#pragma once

#include <string>
#include <vector>

namespace ptyvisor::cli {

// Each row on its own line, each cell padded to its column's widest plus two spaces; the last
// cell of a row is not padded.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace ptyvisor::cli
