// One real GPU kernel: compiled by nvcc for TORCH_CUDA_ARCH_LIST, or hipified
// (tools/amd_build/build_amd.py -> hip/Kernels.hip) and compiled by hipcc for PYTORCH_ROCM_ARCH.
#include <cuda_runtime.h>

__global__ void megatest_scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

namespace at {
namespace cuda {
bool launch_scale(float* data, float factor, int n) {
  megatest_scale<<<(n + 255) / 256, 256>>>(data, factor, n);
  return cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
}
}  // namespace cuda
}  // namespace at
