#!/usr/bin/env bash
# Installs the baseline (a2a-sdk's own server, in the tests' virtualenv) when missing, builds
# ptyhost and the load generator in release mode, and prints GetTask and
# SendMessage(returnImmediately) requests/s of both, side by side, with the ratio.
#   scripts/bench-a2a.sh [SECS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
venv="${PTYHOST_VENV:-/var/cache/ptyhost/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r end2end/a2a/requirements.txt
cargo build --release -p server --bin ptyhost --example a2a_bench
"$CARGO_TARGET_DIR/release/examples/a2a_bench" "$venv/bin/python" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-5}" "${2:-16}"
