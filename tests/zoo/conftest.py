"""The zoo suite: its builders import as `_zoo`; tests/conftest.py's fixtures (gpu) apply."""
import os
import sys
import tempfile

os.environ.setdefault("VKML_CACHE_DIR", tempfile.mkdtemp(prefix="vkml-zoo-cache-"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
