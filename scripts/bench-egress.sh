#!/usr/bin/env bash
# Builds ptyhost and the benchmark in release mode and prints what a sandboxed session's
# network costs: a download through the egress proxy beside network "host", and a port
# preview's latency beside the same request sent directly (examples/egress_bench.rs).
#   scripts/bench-egress.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release -p server --bin ptyhost --example egress_bench
"$CARGO_TARGET_DIR/release/examples/egress_bench" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-300}"
