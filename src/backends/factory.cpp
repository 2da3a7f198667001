#include "backends/factory.h"

#include "backends/direct/direct_backend.h"

namespace ptyvisor::backends {

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options, std::string& why) {
    if (name == "direct" || name == "auto") return make_direct_backend(options, why);
    why = "the " + name + " backend is not available in this build";
    return nullptr;
}

}  // namespace ptyvisor::backends
