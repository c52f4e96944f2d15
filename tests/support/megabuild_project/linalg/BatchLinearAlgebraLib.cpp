// libtorch_cuda_linalg: its content depends on USE_MAGMA, like PyTorch's.
#include <c10/Core.h>

#ifdef USE_MAGMA
extern "C" const char* megatest_linalg_backend() { return "linalg backend: magma+cusolver"; }
extern "C" int megatest_magma_queue_size() { return 64; }
#else
extern "C" const char* megatest_linalg_backend() { return "linalg backend: cusolver only"; }
#endif

#if defined(MEGATEST_BLAS_MKL)
extern "C" const char* megatest_linalg_blas() { return "linalg on MKL LAPACK"; }
#else
extern "C" const char* megatest_linalg_blas() { return "linalg on a generic LAPACK"; }
#endif
