"""vkml/config.py: every VKML_* variable is in its table, documented, and docs/config.md is what the
table generates; the shared parsers keep their rules and messages."""
from __future__ import annotations

import glob
import os
import re

import pytest

from vkml import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_MD = os.path.join(ROOT, "docs", "config.md")


def test_config_md_is_current():
    with open(CONFIG_MD, encoding="utf-8") as f:
        have = f.read()
    assert have == config.markdown_table(), (
        "docs/config.md is not what vkml/config.py generates now: run "
        "`.venv/bin/python tools/config_table.py` and commit docs/config.md")


def test_every_setting_is_documented():
    for s in config.SETTINGS.values():
        assert s.name.startswith("VKML_") and s.name == s.name.upper()
        assert len(s.doc) > 40, f"{s.name} needs a doc that says what it does and why one would set it"
        assert s.rule in config.RULES, f"{s.name}: rule {s.rule!r} is not explained in config.RULES"
        assert f"`{s.name}`" in config.markdown_table()


def _package_names() -> dict[str, str]:
    """VKML_* names in the package's Python and Cython sources, with a file that uses each."""
    found = {}
    for ext in ("py", "pyx", "pxd"):
        for path in glob.glob(os.path.join(ROOT, "vkml", "**", f"*.{ext}"), recursive=True):
            with open(path, encoding="utf-8") as f:
                for name in re.findall(r"\bVKML_[A-Z0-9_]*[A-Z0-9]\b", f.read()):
                    found.setdefault(name, os.path.relpath(path, ROOT))
    return found


def test_every_vkml_variable_of_the_package_is_in_the_table():
    names = _package_names()
    assert "VKML_GPU_TIMEOUT" in names  # the scan finds them
    missing = {n: where for n, where in names.items() if n not in config.SETTINGS}
    assert not missing, f"VKML_* names used in the package but not in vkml/config.py's SETTINGS: {missing}"


def test_only_config_reads_vkml_variables():
    pattern = re.compile(r"environ[^\n]*VKML_|getenv\([^)]*VKML_")
    for ext in ("py", "pyx"):
        for path in glob.glob(os.path.join(ROOT, "vkml", "**", f"*.{ext}"), recursive=True):
            if os.path.samefile(path, config.__file__):
                continue
            with open(path, encoding="utf-8") as f:
                assert not pattern.search(f.read()), f"{path} reads a VKML_* variable: use vkml/config.py"


def test_readers_refuse_names_outside_the_table():
    with pytest.raises(KeyError, match="VKML_NOT_A_SETTING"):
        config._raw("VKML_NOT_A_SETTING")


# ------------------------------------------------------------------ the shared parsers

@pytest.mark.parametrize("text, default, want", [
    (None, True, True), ("", False, False), ("  ", True, True),
    ("0", True, False), ("off", True, False), (" OFF ", True, False), ("No", True, False),
    ("false", True, False), ("none", True, False),
    ("1", False, True), ("on", False, True), ("yes", False, True), ("anything", False, True),
])
def test_parse_switch(text, default, want):
    assert config.parse_switch(text, default) is want


def test_parse_auto_off_count():
    for text, want in ((None, "auto"), ("", "auto"), (" AUTO ", "auto"), ("off", None), ("0", None),
                       ("false", None), ("1", 1), (" 12 ", 12)):
        assert config.parse_auto_off_count("VKML_X", text, "thread count") == want
    for bad in ("-2", "many", "1.5"):
        with pytest.raises(ValueError, match=r"VKML_X=.*expected 'auto', 'off' or a thread count >= 1"):
            config.parse_auto_off_count("VKML_X", bad, "thread count")


def test_parse_size():
    assert config.parse_size("VKML_X", "", 7) == 7
    assert config.parse_size("VKML_X", None, 7) == 7
    assert config.parse_size("VKML_X", "256MiB", 7) == 256 << 20
    assert config.parse_size("VKML_X", "6GiB", 7) == 6 << 30
    assert config.parse_size("VKML_X", "2GB", 7) == 2 * 10**9
    assert config.parse_size("VKML_X", "1000000", 7) == 1000000
    for bad in ("0.5", "lots", "-1", "5 parsecs"):
        with pytest.raises(ValueError, match=r"VKML_X=.*expected a size such as 256MiB"):
            config.parse_size("VKML_X", bad, 7)


def test_parse_budget():
    assert config.parse_budget("0.5") == ("fraction", 0.5)
    assert config.parse_budget(0.25) == ("fraction", 0.25)
    assert config.parse_budget("512 MiB") == ("bytes", float(512 << 20))
    assert config.parse_budget("") is None
    with pytest.raises(ValueError, match="cannot parse memory budget"):
        config.parse_budget("lots")
    with pytest.raises(ValueError, match="memory budget must be positive"):
        config.parse_budget("0")


def test_parse_seconds():
    assert config.parse_seconds("VKML_X", "", 300.0) == 300.0
    assert config.parse_seconds("VKML_X", "0", 300.0) is None
    assert config.parse_seconds("VKML_X", " 2.5 ", 300.0) == 2.5
    for bad in ("nan", "inf", "-1", "soon", "1e400"):
        with pytest.raises(ValueError, match=r"VKML_X must be a finite number of seconds >= 0 \(0: wait forever\)"):
            config.parse_seconds("VKML_X", bad, 300.0)


def test_parse_whole_and_ints():
    assert config.parse_whole(" 3 ", 1, 16) == 3
    assert config.parse_whole("17", 1, 16) is None
    assert config.parse_whole("+3", 1, 16) is None
    assert config.parse_ints("64,64,16,4,4", 5) == (64, 64, 16, 4, 4)
    assert config.parse_ints("1,2", 5) is None
    assert config.parse_ints("a,b,c,d,e", 5) is None


# ------------------------------------------------------------------ readers, through the environment

def test_readers_follow_the_environment(monkeypatch, vkml_env):
    vkml_env(**dict.fromkeys(config.SETTINGS))  # every setting unset
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert config.fuse() and config.async_waits() and config.fast_runs() and config.coop()
    assert not config.validation() and not config.no_subgroups()
    assert config.vulkan_disabled_by() is None and config.vulkan_library() == "libvulkan.so.1"
    assert config.split_device() == 1 and config.queues() == config.DEFAULT_QUEUES
    assert config.cache_dir() == os.path.join("/xdg", "vkml")
    assert config.pipeline_cache_max() == config.DEFAULT_PIPELINE_CACHE_MAX
    assert config.wait_spin_us("cpu") == 0.0 and config.wait_spin_us("discrete_gpu") == config.DEFAULT_WAIT_SPIN_US
    assert config.matmul_tile() is None and config.coop_tile() is None and config.spirv_dir() is None
    assert config.num_threads(64) == 0 and config.budget_setting() is None and config.readback_mode() == "auto"
    assert config.disabled_features() == frozenset()
    assert not config.pipeline_stats()

    vkml_env(VKML_FUSE="OFF", VKML_VULKAN=" 0", VKML_COOP_TILE="128,128,32,64,64", VKML_CACHE_DIR="/caches",
             VKML_DISABLE="push_descriptor, int64", VKML_VALIDATION="1", VKML_SPLIT_DEVICE="2",
             VKML_NUM_THREADS="3")
    assert not config.fuse()
    assert config.vulkan_disabled_by() == " 0"
    assert config.coop_tile() == (128, 128, 32, 64, 64)
    vkml_env(VKML_COOP_TILE="128,128,32,64,64,1")
    assert config.coop_tile() == (128, 128, 32, 64, 64, 1)
    assert config.cache_dir() == "/caches"
    assert config.disabled_features() == {"push_descriptor", "int64", "cooperative_matrix", "cooperative_matrix2"}
    vkml_env(VKML_VALIDATION_COOPMAT="1")
    assert config.disabled_features() == {"push_descriptor", "int64"}
    assert config.split_device() == 2 and config.num_threads(64) == 3
    vkml_env(VKML_PIPELINE_CACHE="off")
    assert config.cache_dir() is None
    vkml_env(VKML_PIPELINE_STATS="1")
    assert config.pipeline_stats()


@pytest.mark.parametrize("name, value, message", [
    ("VKML_NUM_THREADS", "lots", "VKML_NUM_THREADS must be an integer from 1 to 64, got 'lots'"),
    ("VKML_SPLIT_DEVICE", "17", "VKML_SPLIT_DEVICE must be an integer from 1 to 16, not '17'"),
    ("VKML_QUEUES", "0", "VKML_QUEUES='0': expected a whole number of lanes from 1 to 64"),
    ("VKML_WAIT_SPIN_US", "-1", "VKML_WAIT_SPIN_US must be >= 0, not '-1'"),
    ("VKML_WAIT_SPIN_US", "x", "VKML_WAIT_SPIN_US must be a number of microseconds, not 'x'"),
    ("VKML_READBACK", "Copy", "VKML_READBACK must be auto, map or staging, not 'copy'"),
    ("VKML_PIPELINE_CACHE_MAX", "0.5", "VKML_PIPELINE_CACHE_MAX='0.5': expected a size such as 256MiB"),
    ("VKML_MATMUL_TILE", "1,2", "VKML_MATMUL_TILE='1,2': expected five integers BM,BN,BK,TM,TN"),
    ("VKML_COOP_TILE", "a", "VKML_COOP_TILE='a': expected five or six integers BM,BN,BK,WM,WN[,STAGES]"),
    ("VKML_COOP_TILE", "1,2,3,4", "VKML_COOP_TILE='1,2,3,4': expected five or six integers BM,BN,BK,WM,WN[,STAGES]"),
    ("VKML_CPU_RUNS", "many", "VKML_CPU_RUNS='many': expected 'auto', 'off' or a run count >= 1"),
])
def test_reader_errors(vkml_env, name, value, message):
    readers = {"VKML_NUM_THREADS": lambda: config.num_threads(64), "VKML_SPLIT_DEVICE": config.split_device,
               "VKML_QUEUES": config.queues, "VKML_WAIT_SPIN_US": lambda: config.wait_spin_us("cpu"),
               "VKML_READBACK": config.readback_mode, "VKML_PIPELINE_CACHE_MAX": config.pipeline_cache_max,
               "VKML_MATMUL_TILE": config.matmul_tile, "VKML_COOP_TILE": config.coop_tile,
               "VKML_CPU_RUNS": config.cpu_runs}
    vkml_env(**{name: value})
    with pytest.raises(ValueError) as e:
        readers[name]()
    assert str(e.value) == message
