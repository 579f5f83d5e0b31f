#!/usr/bin/env bash
# Builds the release ptyhost with its web UI embedded and serves it on its embedded SQLite
# (./data). The build prints `binary: PATH`: that one file is the whole server, and runs
# from any directory. Extra arguments go to `ptyhost serve`, e.g.
# scripts/run.sh --listen 0.0.0.0:3000.
set -euo pipefail
cd "$(dirname "$0")/.."
# One checkout, rebuilt again and again: incremental release builds turn a one-file change
# into seconds (the tests' fresh clones keep it off, see env.sh).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-1}"
. scripts/env.sh
scripts/setup.sh
cargo xtask build --release
exec "$CARGO_TARGET_DIR/release/ptyhost" serve "$@"
