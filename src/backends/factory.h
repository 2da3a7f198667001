// Choosing a backend by name: systemd, direct, or auto (systemd when it runs here).
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"

namespace ptyvisor::backends {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options, std::string& why);

}  // namespace ptyvisor::backends
