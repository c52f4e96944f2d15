"""A downstream C++ extension built against the installed torch (layout test, item 7)."""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="layout-ext",
    version="0.1",
    ext_modules=[CppExtension("layout_ext", ["layout_ext.cpp"])],
    cmdclass={"build_ext": BuildExtension},
    install_requires=["torch==2.13.*"],
)
