#include "backends/factory.h"

#include "backends/direct/direct_backend.h"
#include "backends/systemd/systemd_backend.h"

namespace ptyvisor::backends {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options, std::string& why) {
    if (name == "direct") return make_direct_backend(options, why);
    if (name == "systemd") return make_systemd_backend(options, why);
    if (name == "auto") {
        if (systemd_is_running()) return make_systemd_backend(options, why);
        return make_direct_backend(options, why);
    }
    why = "unknown backend '" + name + "'";
    return nullptr;
}

}  // namespace ptyvisor::backends
