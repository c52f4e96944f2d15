#include <c10/Core.h>
#include <cstdlib>

namespace c10 {
void* allocate(std::size_t bytes) { return std::malloc(bytes ? bytes : 1); }
void release(void* ptr) { std::free(ptr); }
}  // namespace c10
