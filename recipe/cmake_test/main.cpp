// Links libtorch and runs a small tensor computation; exits non-zero on a wrong result.
#include <torch/torch.h>

#include <iostream>

int main() {
  const torch::Tensor a = torch::arange(6, torch::kFloat32).reshape({2, 3});
  const torch::Tensor b = torch::ones({3, 2});
  const torch::Tensor product = torch::matmul(a, b);  // rows sum to 3 and 12
  const torch::Tensor expected = torch::tensor({{3.0f, 3.0f}, {12.0f, 12.0f}});
  if (!torch::allclose(product, expected)) {
    std::cerr << "unexpected result:\n" << product << '\n';
    return 1;
  }
  std::cout << "torch_smoke OK: " << product.sizes() << " sum=" << product.sum().item<float>() << '\n';
  return 0;
}
