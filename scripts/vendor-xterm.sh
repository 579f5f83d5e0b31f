#!/usr/bin/env bash
# Brings the ESM builds of xterm.js and its addons from npm into public/vendor/, where the
# UI's import map resolves the bare specifiers of the xterm-js-rs bindings. Skips the work
# when the pinned versions are already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(@xterm/xterm@6.0.0 @xterm/addon-fit@0.11.0 @xterm/addon-unicode11@0.9.0 @xterm/addon-webgl@0.19.0)
out=public/vendor
stamp="$out/.packages"
[ "$(cat "$stamp" 2>/dev/null)" = "${PACKAGES[*]}" ] && exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "${PACKAGES[@]}" >/dev/null)
mkdir -p "$out"
for tgz in "$work"/*.tgz; do
  tar -xzf "$tgz" -C "$work" package/lib package/css 2>/dev/null || tar -xzf "$tgz" -C "$work" package/lib
  for mjs in "$work"/package/lib/*.mjs; do
    # The source maps are not shipped; drop their references.
    grep -v '^//# sourceMappingURL=' "$mjs" > "$out/$(basename "$mjs")"
  done
  [ -f "$work/package/css/xterm.css" ] && cp "$work/package/css/xterm.css" "$out/"
  rm -rf "$work/package"
done
echo "${PACKAGES[*]}" > "$stamp"
