#include <c10/Core.h>
#include "torch_version.h"

namespace at {
std::string describe() { return c10::join("megatorch", TORCH_VERSION_STRING); }
}  // namespace at
