#!/usr/bin/env bash
# Upload and download speed of ptyhost's files routes beside a plain Python file server
# (http.server with a streaming PUT), both over loopback with the same curl, in one run; and
# each server's resident memory growth while it transfers. Both servers fsync an upload
# before they answer it.
#   scripts/bench-files.sh [MiB] [PTYHOST]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
mib="${1:-1024}"
bin="${2:-}"
if [ -z "$bin" ]; then
  cargo build --release -p server --bin ptyhost
  bin="$CARGO_TARGET_DIR/release/ptyhost"
fi
token="bench-files-admin-token-0123456789"
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/ptyhost-wd" "$tmp/python-wd" "$tmp/data"
head -c "${mib}M" /dev/urandom >"$tmp/source.bin"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Runs curl ARGS while sampling server PID's RSS; prints "MB/s growth_MiB".
measure() {
  local pid="$1" field="$2"
  shift 2
  local before peak speed
  before="$(rss_kib "$pid")"
  (
    peak="$before"
    while kill -0 "$pid" 2>/dev/null; do
      now="$(rss_kib "$pid")"
      [ "$now" -gt "$peak" ] && peak="$now" && echo "$peak" >"$tmp/peak"
      sleep 0.02
    done
  ) &
  local sampler=$!
  echo "$before" >"$tmp/peak"
  speed="$(curl -sS --fail -o /dev/null -w "%{$field}" "$@")"
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  peak="$(cat "$tmp/peak")"
  awk -v s="$speed" -v b="$before" -v p="$peak" 'BEGIN { printf "%.0f %.1f\n", s / 1e6, (p - b) / 1024 }'
}

# ptyhost, with a session whose working directory is ptyhost-wd.
"$bin" serve --listen 127.0.0.1:0 --data-dir "$tmp/data" --bootstrap-token "$token" \
  --max-file-bytes "$((mib + 1))MiB" >"$tmp/ptyhost.out" 2>/dev/null &
pids+=($!)
ptyhost_pid=$!
until grep -q '^listening on ' "$tmp/ptyhost.out" 2>/dev/null; do sleep 0.05; done
base="$(sed -n 's/^listening on //p' "$tmp/ptyhost.out")"
sid="$(curl -sS --fail -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d "{\"command\": \"sleep 3600\", \"cwd\": \"$tmp/ptyhost-wd\"}" "$base/sessions" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["session_id"])')"
url="$base/sessions/$sid/files/big.bin"
auth=(-H "Authorization: Bearer $token")
read -r p_up p_up_mem < <(measure "$ptyhost_pid" speed_upload "${auth[@]}" -T "$tmp/source.bin" "$url")
read -r p_down p_down_mem < <(measure "$ptyhost_pid" speed_download "${auth[@]}" "$url")
cmp -s "$tmp/source.bin" "$tmp/ptyhost-wd/big.bin" || { echo "ptyhost stored other bytes" >&2; exit 1; }

# The baseline: Python's http.server, plus a PUT that streams the body to disk.
cat >"$tmp/server.py" <<'EOF'
import http.server, os, shutil, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_PUT(self):
        left = int(self.headers["Content-Length"])
        path = self.translate_path(self.path)
        with open(path, "wb") as f:
            while left:
                chunk = self.rfile.read(min(left, 1 << 16))
                f.write(chunk)
                left -= len(chunk)
            f.flush()
            os.fsync(f.fileno())
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Handler(*a, directory=sys.argv[1]))
print(server.server_address[1], flush=True)
server.serve_forever()
EOF
python3 "$tmp/server.py" "$tmp/python-wd" >"$tmp/python.out" &
pids+=($!)
python_pid=$!
until [ -s "$tmp/python.out" ]; do sleep 0.05; done
purl="http://127.0.0.1:$(cat "$tmp/python.out")/big.bin"
read -r b_up b_up_mem < <(measure "$python_pid" speed_upload -T "$tmp/source.bin" "$purl")
read -r b_down b_down_mem < <(measure "$python_pid" speed_download "$purl")
cmp -s "$tmp/source.bin" "$tmp/python-wd/big.bin" || { echo "the baseline stored other bytes" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%s MiB over loopback with curl\n' "$mib"
printf '%-10s %12s %12s %14s %14s\n' server 'upload MB/s' 'download MB/s' 'upload +MiB' 'download +MiB'
printf '%-10s %12s %12s %14s %14s\n' ptyhost "$p_up" "$p_down" "$p_up_mem" "$p_down_mem"
printf '%-10s %12s %12s %14s %14s\n' python "$b_up" "$b_down" "$b_up_mem" "$b_down_mem"
printf 'ptyhost / python: upload %sx, download %sx\n' "$(ratio "$p_up" "$b_up")" "$(ratio "$p_down" "$b_down")"
