#!/usr/bin/env bash
# Starts a throwaway PostgreSQL, builds ptyhost and the load generator in release mode, and
# prints echo latency and flood throughput attached to a session's own node against
# through another node, and the time from SIGKILL of a node to its sessions' node_lost
# (examples/cluster_bench.rs).
#   scripts/bench-cluster.sh [FLOOD_MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release -p server --bin ptyhost --example cluster_bench
pg_dir=$(mktemp -d)
trap 'scripts/postgres.sh remove "$pg_dir"' EXIT
url=$(scripts/postgres.sh start "$pg_dir")
"$CARGO_TARGET_DIR/release/examples/cluster_bench" "$url" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-64}"
