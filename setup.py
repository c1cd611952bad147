"""Build: every vkml/**/*.pyx becomes an extension module.

VKML_BUILD_ONLY=_sched builds just the modules whose path contains that text (for
development; a normal build builds them all). VKML_SANITIZE=thread (or address) builds the extensions with that sanitizer, for the
stress tests of the scheduler (see README, "Sanitizer builds").
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


setup(ext_modules=_extensions())
