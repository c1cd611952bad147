"""Build: every vkml/**/*.pyx becomes an extension module.

VKML_BUILD_ONLY=_sched builds just the modules whose path contains that text (for
development; a normal build builds them all). VKML_SANITIZE=thread (or address) builds the extensions with that sanitizer, for the
stress tests of the scheduler (see README, "Sanitizer builds").

Before the extensions, tools/build_shaders.py compiles shaders/*.comp into vkml/spv/*.spv
(only what changed). The SPIR-V is committed, so a machine without a shader compiler
builds fine; VKML_SKIP_SHADERS=1 skips the step, and so does a VKML_BUILD_ONLY that names
no Vulkan module.
"""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _extensions() -> list[Extension]:
    sanitize = os.environ.get("VKML_SANITIZE", "")
    cflags = ["-O3", "-std=c11", "-Wno-unused-function", "-Wno-unreachable-code"]
    ldflags = ["-pthread"]
    if sanitize:
        cflags += [f"-fsanitize={sanitize}", "-g", "-O1", "-fno-omit-frame-pointer"]
        ldflags += [f"-fsanitize={sanitize}"]
    exts = []
    only = os.environ.get("VKML_BUILD_ONLY")  # a substring: build just the matching modules
    for pyx in sorted(glob.glob("vkml/**/*.pyx", recursive=True)):
        if only and only not in pyx:
            continue
        mod = pyx[:-4].replace(os.sep, ".")
        exts.append(
            Extension(
                mod,
                [pyx],
                include_dirs=[os.path.join(HERE, "vkml", "include"), numpy.get_include()],
                extra_compile_args=cflags,
                extra_link_args=ldflags,
                libraries=["dl"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        )
    return cythonize(exts, compiler_directives={"language_level": "3"}, quiet=True)


def _build_shaders() -> None:
    only = os.environ.get("VKML_BUILD_ONLY")
    if os.environ.get("VKML_SKIP_SHADERS") or (only and not any(k in only for k in ("vulkan", "kernels", "shader"))):
        return
    tool = os.path.join(HERE, "tools", "build_shaders.py")
    if not os.path.exists(tool):  # an sdist/wheel build without tools/: the .spv ship as package data
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location("vkml_build_shaders", tool)
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    try:
        mod.build(quiet=False)
    except mod.ShaderBuildError as e:
        raise SystemExit(f"error: {e}")


_build_shaders()
setup(ext_modules=_extensions())
