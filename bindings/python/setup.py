"""The build step of pyproject.toml: compile libllm with CMake (the repository two levels up) and copy
its shared library into the package, so the wheel imports from any directory with no variables.

LLM_USE_INSTALLED=1: build nothing; the package loads the installed libllm (ldconfig's path).
LLM_CMAKE_ARGS: extra arguments for the CMake configure step (split on spaces).
"""
import glob
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        if os.environ.get("LLM_USE_INSTALLED") == "1":
            return
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            raise RuntimeError("libllm's sources are not at %s (build from a checkout, or set "
                               "LLM_USE_INSTALLED=1 to use an installed libllm)" % ROOT)
        build = os.path.join(HERE, "build", "cmake")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(min(os.cpu_count() or 1, 2))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DLLM_BUILD_TESTS=OFF", "-DLLM_BUILD_EXAMPLES=OFF", "-DLLM_INSTALL_STATIC=OFF"]
                              + os.environ.get("LLM_CMAKE_ARGS", "").split())
        subprocess.check_call(["cmake", "--build", build, "--target", "llm", "-j", jobs])
        # The soname's file (libllm.so.0), resolved from its symlink: ctypes opens it by that name.
        libs = glob.glob(os.path.join(build, "lib", "libllm.so.*.*.*")) or glob.glob(
            os.path.join(build, "lib", "libllm.*.dylib"))
        if not libs:
            raise RuntimeError("the CMake build produced no libllm shared library in %s/lib" % build)
        dest = os.path.join(self.build_lib, "libllm_runtime")
        os.makedirs(dest, exist_ok=True)
        name = "libllm.so.0" if libs[0].endswith(tuple("0123456789")) else "libllm.0.dylib"
        shutil.copyfile(libs[0], os.path.join(dest, name))


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return os.environ.get("LLM_USE_INSTALLED") != "1"


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
