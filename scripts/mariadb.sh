#!/usr/bin/env bash
# A private MariaDB for freshet's tests, demo and benchmarks.
#
#   scripts/mariadb.sh [start]   install MariaDB if missing, start the private instance (idempotent)
#                                and print the environment that tests read
#   scripts/mariadb.sh env       print that environment only
#   scripts/mariadb.sh stop      stop the private instance
#
# The instance is ours alone: its own datadir (default .mariadb/ in the repository), 127.0.0.1
# only, a non-default port (default 33306), ROW binlog with full row images and a server id, TLS
# with a throw-away CA (so that freshet's upstream TLS can be tested), local_infile on, and
# utf8mb4 as the default character set, as on current MySQL 8 and MariaDB 11 servers (the
# server's own default, latin1, is not what applications run on).
# It takes up to 2,100 connections: the load harness's 1,000-connection runs go through freshet,
# which holds one upstream connection per client.
#
# Settings (environment): FRESHET_MARIADB_DIR, FRESHET_MARIADB_PORT, and FRESHET_MARIADB_OPTS:
#                         server options added at initialisation and at every start, for a
#                         test's own instance of another configuration (e.g.
#                         --lower-case-table-names=1, which must be the datadir's from the start).
# Printed for tests:      FRESHET_TEST_MYSQL_URL   a user with all privileges, database freshet_test
#                         FRESHET_TEST_MYSQL_SOCKET the server's unix socket (root, no password)
#                         FRESHET_TEST_TLS_CA      the CA that signed the server's certificate
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${FRESHET_MARIADB_DIR:-$repo/.mariadb}
port=${FRESHET_MARIADB_PORT:-33306}
read -r -a extra <<< "${FRESHET_MARIADB_OPTS:-}"
sock=$dir/mariadb.sock
user=freshet
password=freshet

print_env() {
    echo "export FRESHET_TEST_MYSQL_URL=mysql://$user:$password@127.0.0.1:$port/freshet_test"
    echo "export FRESHET_TEST_MYSQL_SOCKET=$sock"
    echo "export FRESHET_TEST_TLS_CA=$dir/tls/ca.pem"
}

log() { echo "mariadb.sh: $*" >&2; }

install_server() {
    command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] && return 0
    log "MariaDB is not installed; installing it from the distribution's packages"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq >&2
    # policy-rc.d keeps the package from starting a system-wide server we do not want.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mariadb-server mariadb-client >&2
}

mariadbd_bin() { command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd; }

client() { mariadb --no-defaults --protocol=socket --socket="$sock" -uroot "$@"; }

running() { client -e 'SELECT 1' >/dev/null 2>&1; }

make_tls() {
    [ -f "$dir/tls/server-key.pem" ] && return 0
    command -v openssl >/dev/null 2>&1 || { log "openssl missing: TLS tests will fail"; return 0; }
    mkdir -p "$dir/tls"
    (
        cd "$dir/tls"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=freshet test CA" \
            -keyout ca-key.pem -out ca.pem 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
            -keyout server-key.pem -out server-req.pem 2>/dev/null
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext
        openssl x509 -req -in server-req.pem -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
            -days 3650 -extfile san.ext -out server-cert.pem 2>/dev/null
    )
}

init_datadir() {
    [ -d "$dir/data/mysql" ] && return 0
    log "initialising $dir/data"
    mkdir -p "$dir/data" "$dir/binlog"
    mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" \
        --auth-root-authentication-method=socket --skip-test-db "${extra[@]}" >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; exit 1; }
}

start_server() {
    local tls=()
    [ -f "$dir/tls/server-key.pem" ] && tls=(--ssl-ca="$dir/tls/ca.pem"
        --ssl-cert="$dir/tls/server-cert.pem" --ssl-key="$dir/tls/server-key.pem")
    log "starting mariadbd on 127.0.0.1:$port"
    # A temporary directory of its own: a starting mariadbd deletes every `#sql*` file in its
    # tmpdir, so with a shared /tmp a test's new private server removed another server's
    # internal temporary tables mid-query (error 6, "Error on delete of '/tmp/#sql-temptable-...").
    mkdir -p "$dir/tmp"
    setsid nohup "$(mariadbd_bin)" --no-defaults \
        --datadir="$dir/data" --socket="$sock" --pid-file="$dir/mariadb.pid" --tmpdir="$dir/tmp" \
        --log-error="$dir/error.log" --port="$port" --bind-address=127.0.0.1 \
        --user="$(id -un)" --skip-name-resolve \
        --server-id=1 --log-bin="$dir/binlog/mariadb-bin" --binlog-format=ROW \
        --binlog-row-image=FULL --max-allowed-packet=256M --local-infile=1 \
        --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 \
        --performance-schema=OFF --max-connections=2100 \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        "${tls[@]}" "${extra[@]}" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 1 120); do
        running && return 0
        sleep 0.5
    done
    log "mariadbd did not come up; the end of $dir/error.log:"
    tail -n 30 "$dir/error.log" >&2
    exit 1
}

bootstrap() {
    client <<SQL
CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY '$password';
CREATE USER IF NOT EXISTS '$user'@'localhost' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO '$user'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$user'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS freshet_test;
CREATE DATABASE IF NOT EXISTS gotest;
SQL
}

case "${1:-start}" in
    env)
        print_env
        ;;
    stop)
        if running; then
            client -e 'SHUTDOWN' || true
            for _ in $(seq 1 60); do running || break; sleep 0.5; done
        fi
        ;;
    start)
        install_server
        mkdir -p "$dir"
        if ! running; then
            make_tls
            init_datadir
            start_server
        fi
        bootstrap
        print_env
        ;;
    *)
        echo "usage: $0 [start|env|stop]" >&2
        exit 2
        ;;
esac
