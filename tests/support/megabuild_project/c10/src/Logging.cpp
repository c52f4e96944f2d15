#include <c10/Core.h>
#include <cstdio>

namespace c10 {
void log_message(const std::string& message) { std::fprintf(stderr, "[c10] %s\n", message.c_str()); }
}  // namespace c10
