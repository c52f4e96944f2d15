// One small translation unit: torch/extension.h pulls in ATen, the autograd API and pybind11.
#include <torch/extension.h>

torch::Tensor scaled_add(const torch::Tensor& a, const torch::Tensor& b, double alpha) {
  return a + alpha * b;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scaled_add", &scaled_add, "a + alpha * b, computed by libtorch");
}
