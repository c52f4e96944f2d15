#include "core_units.h"

namespace at {
double run_core_units(int seed) { return MEGATEST_CALL_ALL_UNITS(seed); }
}  // namespace at

// BLAS-dependent, like PyTorch's BLAS kernels: the compile flag decides which code is built
#if defined(MEGATEST_BLAS_MKL)
extern "C" const char* megatest_dense_blas() { return "dense ops on MKL"; }
#else
extern "C" const char* megatest_dense_blas() { return "dense ops on a generic BLAS"; }
#endif
