#!/usr/bin/env bash
# Installs, only when missing, what building ptyhost needs: the wasm32 target (the front
# end's own npm tools, pinned in frontend/package-lock.json, are installed by
# `cargo xtask build`). With --e2e also Debian's Chromium, the Playwright package and the
# Python a2a-sdk and MCP clients for the end-to-end tests. Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown

if [ "${1:-}" = "--e2e" ]; then
  command -v chromium >/dev/null || {
    apt-get update
    apt-get install -y --no-install-recommends chromium
  }
  (cd end2end && npm ci --no-audit --no-fund)
  # The official Python A2A and MCP clients, in a virtualenv outside the clone.
  venv="${PTYHOST_VENV:-/var/cache/ptyhost/venv}"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r end2end/requirements.txt
fi
