"""The scheduler core under ThreadSanitizer: tests/sched/tsan_stress.c, built with
-fsanitize=thread (futex parking, and the condvar fallback), must run with no report; so must
the CPU device's thread pool (tests/sched/tsan_pool.c, vkml/include/cpu_pool.h).

Needs gcc and libtsan (Debian/Ubuntu: apt-get install libtsan2); skipped when they are missing.
"""
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "vkml", "include")
SOURCE = os.path.join(HERE, "tsan_stress.c")


def build(tmp_path, *defines: str, source: str = SOURCE) -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    exe = str(tmp_path / os.path.splitext(os.path.basename(source))[0])
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", *defines, "-O1", "-g", "-fsanitize=thread",
           "-Wno-unused-function", "-pthread", f"-I{INCLUDE}", source, "-o", exe]
    r = subprocess.run(cmd + ["-Wno-tsan"], capture_output=True, text=True)
    if r.returncode and "-Wno-tsan" in r.stderr:  # compilers without that warning
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        if "tsan" in r.stderr.lower() and ("cannot find" in r.stderr or "not found" in r.stderr):
            pytest.skip("libtsan is not installed (Debian/Ubuntu: apt-get install libtsan2)")
        raise AssertionError(f"building the stress driver failed:\n{r.stderr}")
    return exe


def run(exe: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=240, env=env)
    if "unexpected memory mapping" in r.stderr and shutil.which("setarch"):
        # older TSan runtimes and high mmap randomisation: retry without ASLR
        r = subprocess.run(["setarch", os.uname().machine, "-R", exe, *args],
                           capture_output=True, text=True, timeout=240, env=env)
    if "unexpected memory mapping" in r.stderr:
        pytest.skip("this kernel's address layout is not supported by the TSan runtime")
    return r


@pytest.mark.parametrize("variant", ["futex", "condvar"])
def test_core_is_race_free_under_tsan(tmp_path, variant):
    exe = build(tmp_path, *(["-DSCHED_NO_FUTEX"] if variant == "condvar" else []))
    r = run(exe, "160", "7" if variant == "futex" else "8")
    assert "ThreadSanitizer" not in r.stderr, r.stderr[-8000:]
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-4000:])


@pytest.mark.parametrize("share, spin_us", [(1, 200), (0, 0), (1, 0)])
def test_cpu_pool_is_race_free_under_tsan(tmp_path, share, spin_us):
    """Runs in flight from 1-12 threads on a pool of 8 cores, helpers joining other runs' jobs
    (share), watching for work before sleeping (spin) or neither: every chunk runs once, and its
    writes are seen by its run after the join, with no report."""
    exe = build(tmp_path, source=os.path.join(HERE, "tsan_pool.c"))
    r = run(exe, "150", str(share), str(spin_us))
    assert "ThreadSanitizer" not in r.stderr, r.stderr[-8000:]
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-4000:])
