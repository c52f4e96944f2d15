"""Hipify the project's CUDA sources, the way PyTorch's tools/amd_build/build_amd.py does.

The converter is PyTorch's own `hipify` package, imported from `torch/utils/hipify` of this
source tree (as PyTorch's script does, so that hipifying never imports torch). The test
harness puts the real one there, unpacked from the PyTorch 2.13.0 wheel. CUDA files under
`cuda/` become HIP files under `hip/` (`Kernels.cu` -> `hip/Kernels.hip`,
`CUDAContext.cpp` -> `hip/HIPContext.cpp`); the originals stay.

Every run appends one line to `hipify-runs.log` in the project, so tests can count the runs.
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "torch", "utils"))

from hipify import hipify_python  # noqa: E402

# the project's CUDA sources (PyTorch lists aten/src/ATen/cuda/*, c10/cuda/*, ... here)
INCLUDES = ["cuda/*"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project-directory", default=ROOT)
    parser.add_argument("--output-directory", default="")
    args = parser.parse_args()
    project = os.path.abspath(args.project_directory)
    output = os.path.abspath(args.output_directory or project)
    result = hipify_python.hipify(
        project_directory=project, output_directory=output,
        includes=[os.path.join(project, pattern) for pattern in INCLUDES],
        show_progress=False, hip_clang_launch=True)
    converted = sorted(os.path.relpath(r.hipified_path, output) for r in result.values()
                       if r.hipified_path)
    with open(os.path.join(output, "hipify-runs.log"), "a") as log:
        log.write(f"{time.time():.3f} {' '.join(converted)}\n")
    print(f"hipify: {len(converted)} files: {' '.join(converted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
