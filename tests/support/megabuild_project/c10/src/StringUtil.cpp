#include <c10/Core.h>

namespace c10 {
std::string join(const std::string& a, const std::string& b) { return a + "/" + b; }
}  // namespace c10
