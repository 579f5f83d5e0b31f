#!/usr/bin/env bash
# Builds ptyhost with its web UI and serves it on its embedded SQLite (./data).
# Extra arguments go to `ptyhost serve`, e.g. scripts/run.sh --listen 0.0.0.0:3000.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/setup.sh
cargo leptos build
exec "$CARGO_TARGET_DIR/debug/ptyhost" serve "$@"
