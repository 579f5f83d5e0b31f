# Sourced by the scripts: builds are cached outside the clone, so a fresh clone reuses them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/ptyhost/target}"
# Incremental state is per source path: every fresh clone would add gigabytes of it to the
# shared target directory and gain nothing.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
mkdir -p "$CARGO_TARGET_DIR"
