#!/usr/bin/env bash
# Installs, only when missing, what building ptyhost needs: the wasm32 target, cargo-leptos,
# the wasm-bindgen CLI matching Cargo.lock, and the xterm.js ESM files from npm. With --e2e
# also Debian's Chromium, the Playwright package and the Python a2a-sdk client for the
# end-to-end tests. Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_LEPTOS_VERSION=0.3.10
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# cargo-leptos 0.3.11 needs a newer rustc than these machines have; wasm-bindgen-cli cannot
# be installed --locked from this registry (see ../shared/TOOLCHAIN.md).
[ "$(cargo leptos --version 2>/dev/null)" = "cargo-leptos $CARGO_LEPTOS_VERSION" ] ||
  cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked
[ "$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen $WASM_BINDGEN_VERSION" ] ||
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"

scripts/vendor-xterm.sh

if [ "${1:-}" = "--e2e" ]; then
  command -v chromium >/dev/null || {
    apt-get update
    apt-get install -y --no-install-recommends chromium
  }
  (cd end2end && npm ci --no-audit --no-fund)
  # The official Python A2A client, in a virtualenv outside the clone.
  venv="${PTYHOST_VENV:-/var/cache/ptyhost/venv}"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r end2end/a2a/requirements.txt
fi
