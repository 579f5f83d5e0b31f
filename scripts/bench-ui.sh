#!/usr/bin/env bash
# The UI's figures in Chromium, each beside a baseline from the same run
# (end2end/bench/ui.bench.ts), against the release binary with its UI embedded:
#   - Ctrl-C after 10 s of `yes`, five runs, beside Ctrl-C of an idle `sleep`;
#   - the wall's main-thread busy time per second with 24 tiles, all idle and one flooding;
#   - click to painted screen for a seek into the middle of a recording of FRAMES frames
#     (1,000,000), beside a seek near its start.
#   scripts/bench-ui.sh [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/setup.sh --e2e
cargo xtask build --release
cargo build --release -p server --example frame_seek
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
PTYHOST_BENCH_RECORDING=$("$CARGO_TARGET_DIR/release/examples/frame_seek" --prepare "$data" "${1:-1000000}")
export PTYHOST_BENCH_RECORDING PTYHOST_E2E_DATA_DIR=$data
export PTYHOST_BIN="$CARGO_TARGET_DIR/release/ptyhost"
cd end2end && npx playwright test -c playwright.bench.config.ts
