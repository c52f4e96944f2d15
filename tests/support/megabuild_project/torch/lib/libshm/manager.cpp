#include <cstdio>
#include <string>

namespace shm {
std::string manager_name();
}

int main() {
  std::printf("%s\n", shm::manager_name().c_str());
  return 0;
}
