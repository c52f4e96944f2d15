#include <c10/Core.h>

namespace at {
namespace cuda {
// Whether nvcc compiled Kernels.cu into this library.
bool have_kernels() { return MEGATEST_HAVE_CUDA_KERNEL != 0; }
}  // namespace cuda
}  // namespace at
