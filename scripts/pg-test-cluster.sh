#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for chipset-backend's tests
# (issue 30).
#
#   scripts/pg-test-cluster.sh start     # prints the URL on stdout
#   scripts/pg-test-cluster.sh restart [DIR]
#   scripts/pg-test-cluster.sh stop [DIR] # stops it and removes DIR
#
# `start` makes a cluster in a new temporary folder (or $PG_TEST_DIR),
# listening only on 127.0.0.1 (or the one address $PG_TEST_LISTEN, which
# then also admits clients on the networks it is directly on: the
# network-namespace test's veth) at a free port (or $PG_TEST_PORT), with
# password authentication over TCP (scram-sha-256) so the tests can check
# a wrong password, and prints `postgres://chipset:PASSWORD@ADDRESS:PORT/chipset`.
# The folder is written to stderr and to $TMPDIR/chipset-pg-test-cluster.last.
# `restart` and `stop` without DIR use $PG_TEST_DIR, as `start` does, and
# only without it the folder of the last `start` (which, with a shared
# $TMPDIR, may be another user's cluster: give DIR or $PG_TEST_DIR).
#
# With PG_TEST_TLS=1, `start` also turns TLS on: a throwaway CA and a
# server certificate for `localhost` and 127.0.0.1 (made with openssl),
# the CA at DIR/tls/root.crt for the clients' sslrootcert.
#
# PostgreSQL refuses to run as root: as root the server runs as the
# `postgres` user (runuser), which Debian's package creates; as anyone
# else it runs as that user. The binaries are found on PATH or in the
# newest /usr/lib/postgresql/*/bin.
set -euo pipefail

last="${TMPDIR:-/tmp}/chipset-pg-test-cluster.last"

find_bin() {
    local name=$1 dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/$name" ]; then
            echo "$dir/$name"
            return
        fi
    done
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        return
    fi
    echo "pg-test-cluster: $name not found (apt-get install postgresql)" >&2
    exit 1
}

# Runs a command as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

listen=${PG_TEST_LISTEN:-127.0.0.1}

# A port in 15432-15531 nothing listens on, probed from a random start so
# that clusters started at once rarely probe the same one first.
free_port() {
    local port i first=$((RANDOM % 100))
    for i in $(seq 0 99); do
        port=$((15432 + (first + i) % 100))
        if ! (exec 3<>"/dev/tcp/$listen/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    echo "pg-test-cluster: no free port in 15432-15531" >&2
    exit 1
}

start() {
    local dir=${PG_TEST_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/chipset-pg.XXXXXX")}
    local port attempt
    local password
    password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    mkdir -p "$dir"
    chmod 0755 "$dir"
    printf '%s\n' "$password" >"$dir/pwfile"
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres "$dir"
    fi
    as_owner "$(find_bin initdb)" -D "$dir/data" -U chipset --pwfile="$dir/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/pwfile"
    if [ "$listen" != 127.0.0.1 ]; then
        echo "host all all samenet scram-sha-256" >>"$dir/data/pg_hba.conf"
    fi
    local tls_opts=""
    if [ "${PG_TEST_TLS:-}" = 1 ]; then
        make_tls "$dir/tls"
        tls_opts="-c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key"
    fi
    # The probe and the bind are apart: another cluster starting at the
    # same moment (tests start several at once) may bind the port first.
    # Then the start fails with "Address already in use", and the next
    # attempt takes another port; any other failure ends it.
    for attempt in $(seq 1 20); do
        port=${PG_TEST_PORT:-$(free_port)}
        if as_owner "$(find_bin pg_ctl)" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=$listen -c port=$port -c unix_socket_directories=$dir -c max_connections=200 $tls_opts" \
            start >/dev/null 2>"$dir/pg_ctl.err"; then
            break
        fi
        if [ -n "${PG_TEST_PORT:-}" ] || [ "$attempt" = 20 ] ||
            ! grep -q "Address already in use" "$dir/server.log"; then
            cat "$dir/pg_ctl.err" "$dir/server.log" >&2
            exit 1
        fi
        echo "pg-test-cluster: port $port was taken meanwhile; trying another" >&2
        : >"$dir/server.log"
    done
    as_owner "$(find_bin psql)" -h "$dir" -p "$port" -U chipset -d postgres -q \
        -c "CREATE DATABASE chipset" >/dev/null
    printf '%s\n' "$dir" >"$last"
    printf '%s\n' "$port" >"$dir/port"
    echo "pg-test-cluster: cluster in $dir" >&2
    echo "postgres://chipset:$password@$listen:$port/chipset"
}

# Makes a CA (root.crt) and a server certificate signed by it for
# localhost and 127.0.0.1 (server.crt, server.key) in $1.
make_tls() {
    local tls=$1
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=chipset test CA" \
        -keyout "$tls/root.key" -out "$tls/root.crt" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$tls/server.key" -out "$tls/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tls/ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/root.crt" -CAkey "$tls/root.key" \
        -CAcreateserial -days 2 -extfile "$tls/ext" -out "$tls/server.crt" >/dev/null 2>&1
    chmod 0600 "$tls/server.key"
    chmod 0644 "$tls/root.crt"
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres "$tls"
    fi
}

# The cluster folder: DIR, else $PG_TEST_DIR, else the last `start`'s.
dir_arg() {
    local dir=${1:-${PG_TEST_DIR:-}}
    if [ -z "$dir" ] && [ -f "$last" ]; then
        dir=$(cat "$last")
    fi
    if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
        echo "pg-test-cluster: no cluster folder (give DIR or set PG_TEST_DIR)" >&2
        exit 1
    fi
    echo "$dir"
}

restart() {
    local dir
    dir=$(dir_arg "${1:-}")
    as_owner "$(find_bin pg_ctl)" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast restart >/dev/null
}

stop() {
    local dir
    dir=$(dir_arg "${1:-}") || exit 0
    as_owner "$(find_bin pg_ctl)" -D "$dir/data" -w -t 60 -m fast stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    if [ -f "$last" ] && [ "$(cat "$last")" = "$dir" ]; then
        rm -f "$last"
    fi
}

case "${1:-}" in
start) start ;;
restart) restart "${2:-}" ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: $0 start | restart [DIR] | stop [DIR]" >&2
    echo "  DIR defaults to \$PG_TEST_DIR (as for start), else the last started cluster" >&2
    exit 2
    ;;
esac
