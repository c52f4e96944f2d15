#include <c10/Core.h>

namespace shm {
std::string manager_name() { return c10::join("torch", "shm_manager"); }
}  // namespace shm
