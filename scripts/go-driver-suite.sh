#!/usr/bin/env bash
# Runs the go-sql-driver/mysql test suite (someone else's tests of the MySQL protocol) twice,
# against the test MariaDB directly and through freshet, and prints the difference.
#
#   scripts/go-driver-suite.sh        exit 0 when freshet passes every test that direct passes
#
# The suite comes from the Go module proxy (github.com/go-sql-driver/mysql v1.10.0) and is run
# unmodified; it is configured by MYSQL_TEST_USER/PASS/ADDR/DBNAME. TestConnectorReturnsTimeout
# is skipped: it panics inside the driver even against MariaDB directly.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
version=v1.10.0
work=${FRESHET_GO_SUITE_DIR:-$repo/target/go-driver-suite}
# Below Linux's ephemeral range (32768-60999 by default): a fixed port inside it can be taken,
# now and then, by the source port of some outgoing connection, and freshet then fails to bind.
port=${FRESHET_GO_SUITE_PORT:-23407}
admin_port=$((port + 1))
mkdir -p "$work"

command -v go >/dev/null || { echo "go-driver-suite: Go is not installed" >&2; exit 1; }
# Not `eval "$(...)"`: its status would hide a failed start.
mariadb_env=$(scripts/mariadb.sh)
eval "$mariadb_env"

# A writable copy of the module (the module cache is read-only).
src=$(go mod download -json "github.com/go-sql-driver/mysql@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
rm -rf "$work/mysql" && cp -r "$src" "$work/mysql" && chmod -R u+w "$work/mysql"
(cd "$work/mysql" && go mod download && go test -c -o "$work/mysql.test" . >/dev/null)

cargo build -q -p freshet-proxy
bin=${CARGO_TARGET_DIR:-target}/debug
cat > "$work/freshet.toml" <<TOML
[upstream]
url = "$FRESHET_TEST_MYSQL_URL"
[listen]
mysql = "127.0.0.1:$port"
admin = "127.0.0.1:$admin_port"
tls_cert = "${FRESHET_TEST_TLS_CA%/*}/server-cert.pem"
tls_key = "${FRESHET_TEST_TLS_CA%/*}/server-key.pem"
[log]
level = "warn"
TOML
"$bin/freshet" --config "$work/freshet.toml" >"$work/proxy.log" 2>&1 &
freshet_pid=$!
trap 'kill $freshet_pid 2>/dev/null || true' EXIT
live=
for _ in $(seq 1 100); do
    curl -sf -m 1 "http://127.0.0.1:$admin_port/live" >/dev/null 2>&1 && { live=1; break; }
    sleep 0.1
done
[ -n "$live" ] || { echo "go-driver-suite: freshet did not start; its log:" >&2; cat "$work/proxy.log" >&2; exit 1; }

upstream_addr=${FRESHET_TEST_MYSQL_URL#*@}
upstream_addr=${upstream_addr%%/*}

run_suite() { # name addr
    (cd "$work/mysql" && MYSQL_TEST_USER=freshet MYSQL_TEST_PASS=freshet MYSQL_TEST_ADDR=$2 \
        MYSQL_TEST_DBNAME=gotest MYSQL_TEST_PROT=tcp \
        timeout 900 "$work/mysql.test" -test.v -test.count=1 -test.timeout=10m \
        -test.skip 'TestConnectorReturnsTimeout' >"$work/$1.log" 2>&1) || true
    grep -E '^\s*--- (PASS|FAIL|SKIP)' "$work/$1.log" | sed -E 's/^\s*--- (PASS|FAIL|SKIP): ([^ ]+).*/\1 \2/' | sort -k2 > "$work/$1.results"
}

run_suite direct "$upstream_addr"
run_suite freshet "127.0.0.1:$port"

count() { grep -c "^$1 " "$work/$2.results" || true; }
echo "go-sql-driver/mysql $version test suite (tests and subtests):"
printf '  %-8s passed %4s  failed %4s  skipped %4s\n' direct "$(count PASS direct)" "$(count FAIL direct)" "$(count SKIP direct)"
printf '  %-8s passed %4s  failed %4s  skipped %4s\n' freshet "$(count PASS freshet)" "$(count FAIL freshet)" "$(count SKIP freshet)"
lost=$(comm -23 <(grep '^PASS ' "$work/direct.results" | cut -d' ' -f2) <(grep '^PASS ' "$work/freshet.results" | cut -d' ' -f2))
gained=$(comm -13 <(grep '^PASS ' "$work/direct.results" | cut -d' ' -f2) <(grep '^PASS ' "$work/freshet.results" | cut -d' ' -f2))
if [ -n "$gained" ]; then echo "  passed through freshet only: $(echo $gained)"; fi
if [ -n "$lost" ]; then
    echo "  passed directly but NOT through freshet:"
    echo "$lost" | sed 's/^/    /'
    echo "  logs: $work/direct.log, $work/freshet.log (suite), $work/proxy.log (freshet)"
    echo "go-sql-driver: $(count PASS freshet) passed, $(echo "$lost" | wc -l) failed"
    exit 1
fi
[ "$(count PASS direct)" -gt 0 ] || { echo "  the suite passed nothing directly: see $work/direct.log" >&2; exit 1; }
echo "  every test that passes directly passes through freshet"
echo "go-sql-driver: $(count PASS freshet) passed, $(count FAIL freshet) failed, $(count SKIP freshet) skipped"
