#!/usr/bin/env bash
# Builds ptyhost and the benchmark in release mode and prints what the sandbox costs, beside
# the same server with --sandbox off in the same run (examples/sandbox_bench.rs).
#   scripts/bench-sandbox.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release -p server --bin ptyhost --example sandbox_bench
"$CARGO_TARGET_DIR/release/examples/sandbox_bench" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-300}"
