#!/usr/bin/env bash
# Installs the baseline (a2a-sdk's own server, in the tests' virtualenv) when missing, builds
# ptyhost and the load generators in release mode, and prints GetTask and
# SendMessage(returnImmediately) requests/s of both, side by side, with the ratio (and of
# ptyhost on a throwaway PostgreSQL beside SQLite), then the p50 and p99 latency of
# SendMessage (examples/task_latency.rs).
#   scripts/bench-a2a.sh [SECS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
venv="${PTYHOST_VENV:-/var/cache/ptyhost/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r end2end/requirements.txt
cargo build --release -p server --bin ptyhost --example a2a_bench --example task_latency
# ptyhost on PostgreSQL too, beside SQLite.
pg_dir=$(mktemp -d)
trap 'scripts/postgres.sh remove "$pg_dir"' EXIT
pg_url=$(scripts/postgres.sh start "$pg_dir")
PTYHOST_BENCH_POSTGRES_URL=$pg_url "$CARGO_TARGET_DIR/release/examples/a2a_bench" "$venv/bin/python" "$CARGO_TARGET_DIR/release/ptyhost" "${1:-5}" "${2:-16}"
# Latency, with login files that take no time and with ones that take 0.25 s.
for login in 0 0.25; do
  "$CARGO_TARGET_DIR/release/examples/task_latency" "$venv/bin/python" "$CARGO_TARGET_DIR/release/ptyhost" 300 "$login"
done
