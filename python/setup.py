"""Build the `tilekit` Python package and its extension `tilekit._C` against the installed PyTorch.

Two ways to get the kernels into the extension:

  * TILEKIT_KERNELS_LIB=/path/to/libtilekit_kernels.a (built by CMake: target tilekit_kernels,
    <build>/kernels/libtilekit_kernels.a, position-independent): only python/csrc/bindings.cpp
    is compiled here and linked against that static library (plus cudart). Fast, and the
    kernels are exactly the ones the C++ tests and benchmarks use.
  * TILEKIT_KERNELS_LIB unset: kernels/*/*.cu are compiled into the extension by nvcc
    (sm_90a, C++20), which takes a few minutes.

Build in place (no network needed):  cd python && python3 setup.py build_ext --inplace
or install editable:                  pip install --no-build-isolation --no-deps -e python
"""

import glob
import os
import sys
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
# setuptools resolves package paths (and --inplace outputs) against the working directory;
# relative paths given by the caller (TILEKIT_KERNELS_LIB) are resolved against the original one.
INVOCATION_DIR = Path.cwd()
os.chdir(PACKAGE_DIR)
INCLUDE_DIRS = [str(REPO_ROOT / "include"), str(REPO_ROOT / "kernels")]

# Every tilekit kernel is sm_90a-only (wgmma, clusters, setmaxnreg): build for exactly that.
SM90A_GENCODE = "-gencode=arch=compute_90a,code=sm_90a"

CXX_FLAGS = ["-O3", "-std=c++20"]
NVCC_FLAGS = [
    SM90A_GENCODE,
    "-O3",
    "-std=c++20",
    "--expt-relaxed-constexpr",
    "--extended-lambda",
    "-lineinfo",
    # torch.utils.cpp_extension puts -D__CUDA_NO_HALF_OPERATORS__ (and friends) BEFORE these
    # flags; the kernels use the CUDA headers' half / bfloat16 operators and conversions, so
    # undefine them again (the later -U wins).
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
]


def _header_dependencies():
    """Headers whose change must rebuild the extension (setuptools only compares timestamps)."""
    patterns = ["include/tilekit/**/*.cuh", "kernels/**/*.h", "kernels/**/*.cuh"]
    return sorted(str(p) for pattern in patterns for p in REPO_ROOT.glob(pattern))


def _extension():
    sources = [str(PACKAGE_DIR / "csrc" / "bindings.cpp")]
    extra_objects = []
    depends = _header_dependencies()
    kernels_lib = os.environ.get("TILEKIT_KERNELS_LIB")
    if kernels_lib:
        kernels_lib = str((INVOCATION_DIR / kernels_lib).resolve())
        if not Path(kernels_lib).is_file():
            raise SystemExit(f"TILEKIT_KERNELS_LIB={kernels_lib} does not exist (build the CMake target tilekit_kernels)")
        # The archive goes after bindings.o on the link line (setuptools appends extra_objects to
        # the objects, before -l options), so its symbols resolve; relink when it changes.
        extra_objects.append(kernels_lib)
        depends.append(kernels_lib)
    else:
        kernel_sources = sorted(glob.glob(str(REPO_ROOT / "kernels" / "*" / "*.cu")))
        if not kernel_sources:
            raise SystemExit(f"no kernel sources under {REPO_ROOT / 'kernels'}; set TILEKIT_KERNELS_LIB instead")
        sources += kernel_sources
    return CUDAExtension(
        name="tilekit._C",
        sources=sources,
        include_dirs=INCLUDE_DIRS,
        extra_objects=extra_objects,
        depends=depends,
        libraries=["cudart"],
        extra_compile_args={"cxx": CXX_FLAGS, "nvcc": NVCC_FLAGS},
        # Link the process's shared libstdc++ explicitly. On the GPU machine's image the
        # compiler (/opt/gcc) otherwise pulled a static libstdc++ copy into _C.so, and the first
        # std::ostringstream in that copy (an error message of the kernels' argument checks)
        # crashed in its uninitialised locale facets (cuda-gdb backtrace, 2026-11-29).
        extra_link_args=["-l:libstdc++.so.6"] if sys.platform.startswith("linux") else [],
    )


setup(
    name="tilekit",
    version="0.1.0",
    description="tilekit's memory-bound Hopper kernels as PyTorch custom operators",
    packages=["tilekit"],
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
)
