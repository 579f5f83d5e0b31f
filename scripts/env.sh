# Sourced by the scripts: builds are cached outside the clone, so a fresh clone reuses them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/ptyhost/target}"
mkdir -p "$CARGO_TARGET_DIR"
