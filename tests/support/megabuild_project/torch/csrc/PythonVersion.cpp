#include <Python.h>

// The Python this library was compiled for, so tests can tell the builds apart.
extern "C" PyObject* megatest_compiled_for(PyObject*, PyObject*) {
  return PyUnicode_FromString(PY_VERSION);
}
