#!/usr/bin/env bash
# Relay overhead with sysbench's oltp_point_select (--skip_trx=on), against direct MariaDB and
# through freshet, interleaved round by round in one run. Release build.
#
#   benches/sysbench-relay.sh [threads] [seconds] [rounds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
threads=${1:-8}; seconds=${2:-20}; rounds=${3:-2}
command -v sysbench >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench; }
# Not `eval "$(...)"`: its status would hide a failed start.
mariadb_env=$(scripts/mariadb.sh)
eval "$mariadb_env"
cargo build -q --release --locked -p freshet-proxy
bin=${CARGO_TARGET_DIR:-target}/release
work=target/sysbench; mkdir -p "$work"
FRESHET_UPSTREAM_URL=$FRESHET_TEST_MYSQL_URL FRESHET_UPSTREAM_TLS=disabled FRESHET_LISTEN_MYSQL=127.0.0.1:33317 \
FRESHET_LISTEN_ADMIN=127.0.0.1:33318 FRESHET_LOG_LEVEL=warn "$bin/freshet" --config examples/freshet.toml >"$work/freshet.log" 2>&1 &
pid=$!; trap 'kill $pid 2>/dev/null || true' EXIT
sleep 1
common=(--db-driver=mysql --mysql-user=freshet --mysql-password=freshet --mysql-db=freshet_test --mysql-host=127.0.0.1
        --tables=4 --table-size=10000 --mysql-ssl=off)
sysbench oltp_point_select "${common[@]}" --mysql-port=33306 cleanup >/dev/null 2>&1 || true
sysbench oltp_point_select "${common[@]}" --mysql-port=33306 prepare >/dev/null
run() { # label port
    sysbench oltp_point_select "${common[@]}" --mysql-port="$2" --skip_trx=on --threads="$threads" --time="$seconds" \
        --percentile=99 run > "$work/$1.txt"
    local qps p99 avg
    qps=$(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.).*/\1/p' "$work/$1.txt")
    avg=$(sed -n 's/^ *avg: *\([0-9.]*\)$/\1/p' "$work/$1.txt")
    p99=$(sed -n 's/^ *99th percentile: *\([0-9.]*\)$/\1/p' "$work/$1.txt")
    echo "$1 $qps $avg $p99"
}
# freshet's own CPU time (user + system, in clock ticks) from /proc: a cost per relayed query
# that the machine's noise barely moves, unlike throughput.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
echo "sysbench oltp_point_select --skip_trx=on, $threads threads, ${seconds}s per run, $rounds rounds, 4x10000 rows"
: > "$work/results.txt"; : > "$work/cpu.txt"
for r in $(seq 1 "$rounds"); do
    run direct 33306 | tee -a "$work/results.txt"
    before=$(cpu_ticks)
    run freshet 33317 | tee -a "$work/results.txt"
    echo $(( $(cpu_ticks) - before )) >> "$work/cpu.txt"
done
awk '{q[$1]+=$2; a[$1]+=$3; p[$1]+=$4; n[$1]++} END {
  printf "%-8s %10s %9s %9s\n", "target", "qps", "avg ms", "p99 ms";
  for (t in q) printf "%-8s %10.0f %9.3f %9.3f\n", t, q[t]/n[t], a[t]/n[t], p[t]/n[t];
  printf "freshet/direct throughput ratio: %.2f\n", q["freshet"]/q["direct"] }' "$work/results.txt"
awk -v hz="$(getconf CLK_TCK)" -v s="$seconds" 'NR == FNR {ticks += $1; next} $1 == "freshet" {queries += $2 * s}
  END {printf "freshet CPU per relayed query: %.1f us (user+system, from /proc)\n", ticks / hz * 1e6 / queries}' \
  "$work/cpu.txt" "$work/results.txt"
