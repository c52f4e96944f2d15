// Python extension module that exchanges tensors with Python through libtorch_python
// (the pybind11 type casters for at::Tensor live there).
#include <torch/extension.h>

namespace {
torch::Tensor scaled_sum(const torch::Tensor& t, double factor) { return (t * factor).sum(); }
}  // namespace

PYBIND11_MODULE(torch_smoke_ext, m) {
  m.def("scaled_sum", &scaled_sum, "sum of t * factor");
}
