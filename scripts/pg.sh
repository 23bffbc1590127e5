#!/usr/bin/env bash
# scripts/pg.sh — a private PostgreSQL cluster for development, tests and benchmarks.
#
#   scripts/pg.sh url [DBNAME]     ensure the server is up and DBNAME exists (default: yosan);
#                                  print its DATABASE_URL on stdout (and nothing else)
#   scripts/pg.sh reset DBNAME     like url, but drop and recreate DBNAME first
#   scripts/pg.sh start            ensure the server is up
#   scripts/pg.sh stop             stop the private cluster (if it runs)
#   scripts/pg.sh status           exit 0 if the private cluster runs, 3 if not
#   scripts/pg.sh psql [DBNAME [ARGS...]]  open psql on DBNAME (extra arguments go to psql)
#
# The private cluster lives in .data/pg inside the repository (or, when running as root and the
# unprivileged PostgreSQL user cannot traverse the path to the repository, in
# /tmp/yosan-pg-<hash of the repo path>). It listens only on 127.0.0.1:$YOSAN_PG_PORT
# (default 54329) and on a unix socket inside its data folder, with trust authentication, and
# its superuser role is "yosan". It is created with the machine's PostgreSQL binaries
# (/usr/lib/postgresql/*/bin); when they are missing and we are root, Debian's postgresql
# package is installed first. Only if the private cluster cannot be started do we fall back to
# a server already answering on the default local socket or 127.0.0.1:5432.
#
# Environment:
#   YOSAN_PG_PORT   port of the private cluster (default 54329)
#   YOSAN_PG_DATA   data folder of the private cluster (default: see above)
#   YOSAN_PG_BIN    folder holding initdb/pg_ctl/postgres (default: newest /usr/lib/postgresql/*/bin)
#   YOSAN_PG_NO_FALLBACK=1  fail instead of falling back to a server on 5432
#
# All logging goes to stderr; stdout carries only the URL (for `url` and `reset`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PORT="${YOSAN_PG_PORT:-54329}"
ROLE="yosan"

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { printf 'pg.sh: error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

case "$PORT" in
    ''|*[!0-9]*) die "YOSAN_PG_PORT must be a number, got '$PORT'" ;;
esac

valid_dbname() {
    case "$1" in
        ''|*[!A-Za-z0-9_]*) die "database name must match [A-Za-z0-9_]+, got '$1'" ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL binaries

find_bindir() {
    if [ -n "${YOSAN_PG_BIN:-}" ]; then
        [ -x "$YOSAN_PG_BIN/pg_ctl" ] || die "YOSAN_PG_BIN=$YOSAN_PG_BIN has no pg_ctl"
        printf '%s\n' "$YOSAN_PG_BIN"
        return 0
    fi
    local d best=""
    # Pick the highest major version that has a server (initdb + pg_ctl + postgres).
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4n); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
            best="$d"
        fi
    done
    [ -n "$best" ] || return 1
    printf '%s\n' "$best"
}

install_postgres() {
    is_root || return 1
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get: cannot install PostgreSQL"; return 1; }
    log "PostgreSQL server binaries not found; installing Debian's postgresql package (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update </dev/null >&2 || return 1
    apt-get install -y --no-install-recommends postgresql </dev/null >&2 || return 1
}

# ---------------------------------------------------------------------------------------------
# Which OS user runs the server, and where the cluster lives

RUN_USER=""     # empty: run as ourselves

pick_run_user() {
    is_root || { RUN_USER=""; return 0; }
    if getent passwd postgres >/dev/null 2>&1; then
        RUN_USER=postgres
    elif getent passwd yosan >/dev/null 2>&1; then
        RUN_USER=yosan
    else
        log "creating system user 'yosan' to run PostgreSQL (it refuses to run as root)"
        useradd -r -M -d /nonexistent -s /usr/sbin/nologin -c "Yosan private PostgreSQL" yosan >&2 \
            || die "useradd -r yosan failed"
        RUN_USER=yosan
    fi
}

# as_user CMD...: run CMD as the server's OS user, from / (root's cwd may be unreadable to it).
as_user() {
    # 9>&-: the lock descriptor must not leak into a daemonised postmaster.
    if [ -z "$RUN_USER" ]; then
        "$@" 9>&-
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u "$RUN_USER" -- "$@") 9>&-
    else
        local q="" a
        for a in "$@"; do q="$q $(printf '%q' "$a")"; done
        (cd / && su -s /bin/sh "$RUN_USER" -c "$q") 9>&-
    fi
}

repo_hash() { printf '%s' "$ROOT" | sha256sum | cut -c1-12; }
TMP_DATA="/tmp/yosan-pg-$(repo_hash)"
REPO_DATA="$ROOT/.data/pg"

# A unix socket path must fit in sun_path (108 bytes, including the NUL).
socket_fits() { [ "$(printf '%s' "$1/.s.PGSQL.$PORT" | wc -c)" -le 100 ]; }

choose_datadir() {
    if [ -n "${YOSAN_PG_DATA:-}" ]; then
        DATA="$YOSAN_PG_DATA"
        return 0
    fi
    # An existing cluster stays where it is.
    if [ -f "$REPO_DATA/PG_VERSION" ]; then DATA="$REPO_DATA"; return 0; fi
    if [ -f "$TMP_DATA/PG_VERSION" ]; then DATA="$TMP_DATA"; return 0; fi

    DATA="$REPO_DATA"
    if ! socket_fits "$REPO_DATA"; then
        log "the repository path is too long for a unix socket; putting the cluster in $TMP_DATA instead"
        DATA="$TMP_DATA"
        return 0
    fi
    if [ -n "$RUN_USER" ]; then
        mkdir -p "$ROOT/.data"
        # .data holds mode-600 secrets; the folder itself only needs to be traversable.
        chmod a+x "$ROOT/.data" 2>/dev/null || true
        if ! as_user test -x "$ROOT/.data" 2>/dev/null; then
            log "user '$RUN_USER' cannot traverse $ROOT (a parent folder is not searchable by others);"
            log "putting the private cluster in $TMP_DATA instead"
            DATA="$TMP_DATA"
        fi
    fi
}

# ---------------------------------------------------------------------------------------------
# Cluster lifecycle

BIN=""

cluster_running() {
    [ -f "$DATA/PG_VERSION" ] || return 1
    local bin
    bin="${BIN:-$(find_bindir 2>/dev/null || true)}"
    if [ -n "$bin" ]; then
        as_user "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
    else
        [ -f "$DATA/postmaster.pid" ] && kill -0 "$(head -n1 "$DATA/postmaster.pid")" 2>/dev/null
    fi
}

# The port the running cluster listens on (line 4 of postmaster.pid), else $PORT.
running_port() {
    local p
    p="$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)"
    case "$p" in ''|*[!0-9]*) printf '%s\n' "$PORT" ;; *) printf '%s\n' "$p" ;; esac
}

init_cluster() {
    case "$DATA" in *"'"*|*'"'*) die "data folder path must not contain quotes: $DATA" ;; esac
    log "initialising a private PostgreSQL cluster in $DATA ($("$BIN/postgres" --version))"
    mkdir -p "$DATA"
    if [ -n "$RUN_USER" ]; then chown "$RUN_USER": "$DATA"; fi
    chmod 700 "$DATA"
    as_user "$BIN/initdb" -D "$DATA" -U "$ROLE" -A trust -E UTF8 --no-locale >"$DATA.initdb.log" 2>&1 || {
        cat "$DATA.initdb.log" >&2
        die "initdb failed"
    }
    rm -f "$DATA.initdb.log"
    as_user tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# ---- Yosan private cluster (written by scripts/pg.sh) ----
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DATA'
max_connections = 200
shared_buffers = 256MB
effective_cache_size = 1GB
work_mem = 8MB
maintenance_work_mem = 64MB
max_wal_size = 1GB
fsync = on
synchronous_commit = on
full_page_writes = on
logging_collector = off
log_min_duration_statement = -1
EOF
    as_user tee "$DATA/pg_hba.conf" >/dev/null <<'EOF'
# Yosan private cluster: trust, and only on the unix socket in the data folder and 127.0.0.1.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
host    all          all   127.0.0.1/32   trust
local   replication  all                  trust
host    replication  all   127.0.0.1/32   trust
EOF
}

# wait_ready PORT: wait (up to 15s) until the running cluster accepts connections; a postmaster
# that was just killed can still look alive for a moment.
wait_ready() {
    for _ in $(seq 1 30); do
        "$BIN/pg_isready" -q -h "$DATA" -p "$1" -t 1 >/dev/null 2>&1 && return 0
        cluster_running || return 1
        sleep 0.5
    done
    log "the cluster in $DATA looks alive but does not accept connections on port $1"
    return 1
}

start_cluster() {
    local rc=2
    # Is something else already on our port? (0: accepting, 1: rejecting, 2: no answer)
    if [ -x "$BIN/pg_isready" ]; then
        rc=0; "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 2 >/dev/null 2>&1 || rc=$?
        [ "$rc" = 2 ] || [ "$rc" = 3 ] || rc=busy
    fi
    if [ "$rc" = busy ]; then
        log "port 127.0.0.1:$PORT is already taken by another server (set YOSAN_PG_PORT to use another port)"
        return 1
    fi
    if [ -n "$RUN_USER" ]; then chown -R "$RUN_USER": "$DATA" 2>/dev/null || true; fi
    log "starting the private PostgreSQL cluster on 127.0.0.1:$PORT (data: $DATA, log: $DATA/server.log)"
    if ! as_user "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -o "-p $PORT" -w -t 60 start >/dev/null 2>&1; then
        log "pg_ctl start failed; last lines of $DATA/server.log:"
        tail -n 20 "$DATA/server.log" >&2 2>/dev/null || true
        return 1
    fi
}

# Sets PGHOST/PGPORTNUM/PGROLE for the server we will use. Returns 1 if none is available.
SRV_HOST="" SRV_PORT="" SRV_USER="" SRV_URLHOST=""

ensure_private() {
    BIN="$(find_bindir)" || {
        install_postgres || { log "no PostgreSQL server binaries and cannot install them"; return 1; }
        BIN="$(find_bindir)" || { log "PostgreSQL installed but no server binaries found"; return 1; }
    }
    pick_run_user
    choose_datadir
    owner_as_run_user

    # Serialise concurrent invocations (make -j, two terminals) around init/start.
    mkdir -p "$(dirname "$DATA")"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$DATA.lock"
        flock -w 120 9 || die "timed out waiting for the lock $DATA.lock"
    fi

    if [ ! -f "$DATA/PG_VERSION" ]; then
        if [ -d "$DATA" ] && [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
            log "$DATA exists but is not a PostgreSQL data folder; refusing to touch it"
            return 1
        fi
        init_cluster
    fi

    if cluster_running && wait_ready "$(running_port)"; then
        PORT="$(running_port)"
    else
        start_cluster || return 1
    fi
    SRV_HOST="$DATA" SRV_PORT="$PORT" SRV_USER="$ROLE" SRV_URLHOST="127.0.0.1:$PORT"
    return 0
}

# Fallback: a server that already answers on the default socket or on 127.0.0.1:5432.
ensure_fallback() {
    local isready="pg_isready" psql="psql" h u
    if [ -n "$BIN" ] && [ -x "$BIN/pg_isready" ]; then isready="$BIN/pg_isready"; psql="$BIN/psql"; fi
    command -v "$isready" >/dev/null 2>&1 || return 1
    for h in 127.0.0.1 /var/run/postgresql; do
        "$isready" -q -h "$h" -p 5432 -t 3 >/dev/null 2>&1 || continue
        for u in ${PGUSER:-} "$(id -un)" postgres; do
            if "$psql" -X -q -h "$h" -p 5432 -U "$u" -d postgres -Atc \
                "select 1 from pg_roles where rolname = current_user and (rolsuper or rolcreatedb)" \
                </dev/null 2>/dev/null | grep -qx 1; then
                SRV_HOST="$h" SRV_PORT=5432 SRV_USER="$u"
                if [ "$h" = 127.0.0.1 ]; then
                    SRV_URLHOST="127.0.0.1:5432"
                else
                    SRV_URLHOST=""
                fi
                log "FALLBACK: using the PostgreSQL server already running on $h:5432 as role '$u'"
                return 0
            fi
        done
    done
    return 1
}

ensure_server() {
    if ensure_private; then return 0; fi
    if [ "${YOSAN_PG_NO_FALLBACK:-}" = 1 ]; then die "the private cluster could not be started"; fi
    log "the private cluster could not be started; looking for a running server on port 5432"
    ensure_fallback || die "no PostgreSQL available: the private cluster could not be started and nothing answers on the local socket or 127.0.0.1:5432"
}

PSQL() {
    local psql=psql
    if [ -n "$BIN" ] && [ -x "$BIN/psql" ]; then psql="$BIN/psql"; fi
    PGCONNECT_TIMEOUT=10 "$psql" -X -q -v ON_ERROR_STOP=1 -h "$SRV_HOST" -p "$SRV_PORT" -U "$SRV_USER" "$@" </dev/null
}

db_exists() {
    [ "$(PSQL -d postgres -Atc "select 1 from pg_database where datname = '$1'")" = 1 ]
}

create_db() {
    local db="$1"
    db_exists "$db" && return 0
    log "creating database $db"
    if ! PSQL -d postgres -c "create database \"$db\"" >/dev/null 2>&1; then
        db_exists "$db" || die "could not create database $db"   # lost a race: fine
    fi
}

drop_db() {
    local db="$1"
    db_exists "$db" || return 0
    log "dropping database $db"
    PSQL -d postgres -c "drop database if exists \"$db\" with (force)" >/dev/null
}

print_url() {
    local db="$1"
    if [ -n "$SRV_URLHOST" ]; then
        printf 'postgres://%s@%s/%s?sslmode=disable\n' "$SRV_USER" "$SRV_URLHOST" "$db"
    else
        printf 'postgres://%s@/%s?host=%s&port=%s&sslmode=disable\n' "$SRV_USER" "$db" \
            "$(printf '%s' "$SRV_HOST" | sed 's,/,%2F,g')" "$SRV_PORT"
    fi
}

stop_private() {
    local d stopped=0 bin
    bin="$(find_bindir 2>/dev/null || true)"
    pick_run_user_quiet
    for d in ${YOSAN_PG_DATA:-} "$REPO_DATA" "$TMP_DATA"; do
        [ -f "$d/PG_VERSION" ] || continue
        DATA="$d"
        pick_run_user_quiet
        owner_as_run_user
        if [ -f "$d/postmaster.pid" ] && [ -n "$bin" ] && cluster_running; then
            log "stopping the private PostgreSQL cluster in $d"
            as_user "$bin/pg_ctl" -D "$d" -m fast -w -t 60 stop >/dev/null 2>&1 \
                || die "pg_ctl stop failed for $d"
            stopped=1
        fi
    done
    [ "$stopped" = 1 ] || log "the private cluster is not running"
}

# When root and the data folder already exists, run the server as whoever owns it.
owner_as_run_user() {
    is_root || return 0
    [ -d "$DATA" ] || return 0
    local owner
    owner="$(stat -c %U "$DATA" 2>/dev/null || true)"
    case "$owner" in ''|root|UNKNOWN) ;; *) RUN_USER="$owner" ;; esac
}

# Like pick_run_user but never creates a user (used by stop/status).
pick_run_user_quiet() {
    RUN_USER=""
    is_root || return 0
    if getent passwd postgres >/dev/null 2>&1; then RUN_USER=postgres
    elif getent passwd yosan >/dev/null 2>&1; then RUN_USER=yosan
    fi
}

status_private() {
    local d
    pick_run_user_quiet
    BIN="$(find_bindir 2>/dev/null || true)"
    for d in ${YOSAN_PG_DATA:-} "$REPO_DATA" "$TMP_DATA"; do
        DATA="$d"
        pick_run_user_quiet
        owner_as_run_user
        if cluster_running; then
            log "running: $d on 127.0.0.1:$(running_port)"
            return 0
        fi
    done
    log "not running"
    return 3
}

cmd="${1:-url}"
case "$cmd" in
    url)
        db="${2:-yosan}"; valid_dbname "$db"
        ensure_server
        create_db "$db"
        print_url "$db"
        ;;
    reset)
        db="${2:-}"; valid_dbname "$db"
        ensure_server
        drop_db "$db"
        create_db "$db"
        print_url "$db"
        ;;
    start)
        ensure_server
        ;;
    stop)
        stop_private
        ;;
    status)
        status_private
        ;;
    psql)
        db="${2:-yosan}"; valid_dbname "$db"
        ensure_server
        create_db "$db"
        psql=psql; [ -n "$BIN" ] && [ -x "$BIN/psql" ] && psql="$BIN/psql"
        exec "$psql" -h "$SRV_HOST" -p "$SRV_PORT" -U "$SRV_USER" -d "$db" "${@:3}"
        ;;
    -h|--help|help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        ;;
    *)
        die "unknown command '$cmd' (try: url [db] | reset db | start | stop | status | psql [db])"
        ;;
esac
