#!/usr/bin/env bash
# Installs what the tests need (only when missing) and runs every test: the UI build and the
# debug ptyhost that embeds it, the Rust unit and integration tests (real server, real PTYs,
# real WebSocket clients; the store and a cluster of nodes also on PostgreSQL), the official
# Python and JavaScript A2A clients against the server, and the Playwright tests in Chromium
# (against a copy of the binary alone in an empty directory); then the terminal's speed
# regression guard on a release build (echo and flood against a raw PTY in the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/setup.sh --e2e
# The modules of server/src import each other without cycles.
python3 scripts/module-cycles.py
# Every clone path builds its own copies of this workspace's crates and test binaries in
# the shared target dir; copies a day old belong to clones that are gone.
for name in server app frontend xtask ptyhost $(basename -s .rs server/tests/*.rs); do
  find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 \( -name "$name-*" -o -name "lib$name-*" \) \
    -mtime +0 -delete 2>/dev/null || true
done
cargo xtask build
# A throwaway PostgreSQL (temp dir, loopback port, unprivileged user) for the cluster tests
# and the store's second backend; stopped and removed when the tests end.
pg_dir=$(mktemp -d)
trap 'scripts/postgres.sh remove "$pg_dir"' EXIT
PTYHOST_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
export PTYHOST_TEST_POSTGRES_URL
# Not --workspace: that would unify features and build the server with the browser's
# (hydrate) code paths switched on. Each package is tested as it ships.
cargo test -p wire
cargo test -p app
cargo test -p server
export PTYHOST_BIN="$CARGO_TARGET_DIR/debug/ptyhost"
venv="${PTYHOST_VENV:-/var/cache/ptyhost/venv}"
(cd end2end/a2a && "$venv/bin/python" -m pytest -q -p no:cacheprovider)
(cd end2end/mcp && "$venv/bin/python" -m pytest -q -p no:cacheprovider)
(cd end2end && node --experimental-websocket --test a2a-js/ agentic-sandbox/ mcp/)
(cd end2end && npx playwright test)
# The regression guard: no timing in a unit test, a ratio to the raw PTY measured beside it.
cargo build --release -p server --bin ptyhost --example pty_bench --example pty_relay
PTY_BENCH_GUARD=1 "$CARGO_TARGET_DIR/release/examples/pty_bench" "$CARGO_TARGET_DIR/release/ptyhost" 16
