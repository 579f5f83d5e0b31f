#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests and benchmarks (Debian's, installed when missing), as
# an unprivileged user (initdb refuses root) on a loopback port:
#   start DIR   initialises a cluster in DIR on a free port (the first time), starts it and
#               prints its URL
#   stop DIR    stops it, keeping DIR (start brings it back on the same port)
#   remove DIR  stops it and removes DIR
set -euo pipefail
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || {
  apt-get update >&2
  apt-get install -y --no-install-recommends postgresql >&2
}
bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
dir=${2:?usage: postgres.sh start|stop|remove DIR}
as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$1" in
  start)
    if [ ! -f "$dir/port" ]; then
      [ "$(id -u)" = 0 ] && chown postgres "$dir"
      as "$bin/initdb" -D "$dir/data" -U ptyhost --auth=trust --no-sync -E UTF8 >"$dir/initdb.log"
      python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$dir/port"
    fi
    port=$(cat "$dir/port")
    as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
      "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=300" start >/dev/null
    echo "postgres://ptyhost@127.0.0.1:$port/postgres"
    ;;
  stop)
    as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  remove)
    as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: postgres.sh start|stop|remove DIR" >&2; exit 2 ;;
esac
