// libtorch_python: compiled against one Python's headers.
#include <Python.h>
#include <c10/Core.h>

namespace torch {
double self_test();
}

extern "C" PyObject* megatest_self_test(PyObject*, PyObject*) {
  return PyFloat_FromDouble(torch::self_test());
}
