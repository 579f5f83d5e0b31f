#!/usr/bin/env bash
# Builds ptyhost and the benchmark in release mode and prints what a session's lifecycle
# costs: a 100 MiB workspace's snapshot and restore beside tar | zstd of the same folder,
# and pause / resume round trips (examples/lifecycle_bench.rs).
#   scripts/bench-lifecycle.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release -p server --bin ptyhost --example lifecycle_bench
"$CARGO_TARGET_DIR/release/examples/lifecycle_bench" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-5}"
