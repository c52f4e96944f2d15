/* The extension module torch._C: a thin shim over libtorch_python, as in PyTorch. */
#include <Python.h>

PyObject* megatest_self_test(PyObject*, PyObject*);
PyObject* megatest_compiled_for(PyObject*, PyObject*);

static PyMethodDef methods[] = {
    {"self_test", megatest_self_test, METH_NOARGS, "Run the core libraries."},
    {"compiled_for", megatest_compiled_for, METH_NOARGS, "PY_VERSION at compile time."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torch._C", NULL, -1, methods};

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
  /* as PyTorch's Module.cpp: declare the module safe without the GIL, or a free-threaded
     interpreter turns the GIL back on when it imports it */
  if (m != NULL) PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
  return m;
}
