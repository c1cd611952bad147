#!/usr/bin/env bash
# One entry point for a fresh Debian 12 / Ubuntu 24.04 machine, from a clean clone:
#   bash tools/dev.sh run [ARGS]   set up, then `python -m vkml run ARGS` (the shipped model by default)
#   bash tools/dev.sh test [ARGS]  set up, then the test suite (pytest ARGS; fixed hypothesis examples)
# Set-up is idempotent: system packages (when root), a virtual environment in .venv, and vkml
# installed editable with its test extras. It is skipped when nothing it depends on changed.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
[ -n "$cmd" ] && shift || true

system_packages() {
  # Compiler and headers for the Cython extensions, venv, and Vulkan: the loader, Mesa's lavapipe
  # (a Vulkan device on the CPU, so GPU code is tested everywhere), the validation layer, glslang.
  local pkgs=(python3-venv python3-dev gcc g++ libvulkan1 mesa-vulkan-drivers vulkan-tools
              vulkan-validationlayers glslang-tools libtsan2)
  local missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "note: not root; these system packages are missing: ${missing[*]}" >&2
  fi
}

setup() {
  system_packages
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  local stamp=.venv/.vkml-installed
  local want
  want=$(cat pyproject.toml setup.py $(find vkml -name '*.pyx' -o -name '*.pxd' -o -name '*.h' | sort) \
         $(find shaders -type f 2>/dev/null | sort) tools/*.py 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[test]"
    echo "$want" > "$stamp"
  fi
}

case "$cmd" in
  run)  setup; exec .venv/bin/python -m vkml run "$@" ;;
  # The same hypothesis examples on every run (tests/conftest.py's "ci" profile); plain pytest searches afresh.
  test) setup; VKML_HYPOTHESIS_PROFILE=${VKML_HYPOTHESIS_PROFILE:-ci} exec .venv/bin/python -m pytest -q "$@" ;;
  setup) setup ;;
  *) echo "usage: bash tools/dev.sh run|test|setup [ARGS]" >&2; exit 2 ;;
esac
