#!/usr/bin/env bash
# scripts/bench.sh — what `make bench` calls: how much latency and throughput the gateway costs.
#
# Builds yosan, yosan-mock and yosan-load; resets the database yosan_bench on the private
# PostgreSQL cluster; starts the OpenAI-compatible mock and the gateway (configured with the
# mock as its only provider); creates an org, a team, a key and a strict org budget through the
# admin API; then runs the load generator against the mock directly and through the gateway,
# at a constant rate and closed loop; prints the results and the latency the gateway adds; and
# finally checks in SQL that no budget was overspent and the ledger adds up.
# Everything it started is stopped on exit. Only loopback addresses are used.
#
# Environment (defaults in brackets):
#   BENCH_RATE [1000]  BENCH_DURATION [10s]  BENCH_WORKERS [64]  BENCH_WARMUP [2s, 0 to skip]
#   BENCH_MOCK_ADDR [127.0.0.1:9099]  BENCH_GW_ADDR [127.0.0.1:18080]
#   BENCH_CAP ["1000000"]  the strict cap on the org's budget, in the org's currency units
#                          (the default never binds; e.g. BENCH_CAP=40 runs out mid-run)
#   BENCH_MOCK_ARGS        extra flags for yosan-mock (e.g. "-prompt-tokens 8 -latency 20ms")
#   BENCH_TIMEOUT [150]    seconds the run may take after the builds before it is aborted
#   BENCH_SKIP_BUILD=1     use the binaries already in .data/bench/bin
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

RATE="${BENCH_RATE:-1000}"
DURATION="${BENCH_DURATION:-10s}"
WORKERS="${BENCH_WORKERS:-64}"
WARMUP="${BENCH_WARMUP:-2s}"
MOCK_ADDR="${BENCH_MOCK_ADDR:-127.0.0.1:9099}"
GW_ADDR="${BENCH_GW_ADDR:-127.0.0.1:18080}"
CAP="${BENCH_CAP:-1000000}"
TIMEOUT="${BENCH_TIMEOUT:-150}"
DB=yosan_bench

log() { printf '\nbench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

for a in "$MOCK_ADDR" "$GW_ADDR"; do
    case "$a" in
        127.*:*|localhost:*|\[::1\]:*) ;;
        *) die "only loopback addresses are allowed, got '$a'" ;;
    esac
done
command -v curl >/dev/null 2>&1 || die "curl is required (apt-get install curl)"
if ! command -v go >/dev/null 2>&1; then
    [ -x /usr/local/go/bin/go ] || die "go is not on PATH and /usr/local/go/bin/go does not exist"
    export PATH="$PATH:/usr/local/go/bin"
fi

OUT="$ROOT/.data/bench"
BIN="$OUT/bin"
RUN="$OUT/run"

# ---------------------------------------------------------------------------------------------
# cleanup: stop what we started

PIDS=()
WATCHDOG=""
DB_WAS_RUNNING=1
scripts/pg.sh status 2>/dev/null || DB_WAS_RUNNING=0

stop_pid() {
    local pid="$1" i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null || true
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
    wait 2>/dev/null || true
    if [ "$DB_WAS_RUNNING" = 0 ]; then scripts/pg.sh stop 2>/dev/null || true; fi
    [ "$rc" = 0 ] || printf 'bench: failed (exit %s); logs in %s\n' "$rc" "$RUN" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# the ledger: zero overspend, nothing left reserved, counters equal the ledger rows

check_ledger() {
    log "checking the ledger in SQL"
    command -v psql >/dev/null 2>&1 || die "psql not found (install postgresql-client)"
    PSQL() { psql -X -q -v ON_ERROR_STOP=1 -At "$DATABASE_URL" "$@" </dev/null; }
    [ "$(PSQL -c "SELECT to_regclass('budgets') IS NOT NULL AND to_regclass('reservations') IS NOT NULL")" = t ] \
        || die "no budgets/reservations tables in $DATABASE_URL: did the gateway migrate its database?"

    # In-flight settlements finish right after the last response: give them a few seconds.
    local i
    for i in $(seq 1 20); do
        [ "$(PSQL -c 'SELECT coalesce(sum(reserved), 0) FROM budgets')" = 0 ] && break
        sleep 0.5
    done

    echo "reservations by status:"
    PSQL -F ' ' -c "SELECT '  ' || status, count(*), 'overrun=' || count(*) FILTER (WHERE overrun) FROM reservations GROUP BY status ORDER BY status"
    echo "budgets (kind, cap, reserved, spent):"
    PSQL -F ' ' -c "SELECT '  ' || node_kind, coalesce(cap::text, 'none'), reserved, spent FROM budgets ORDER BY id"

    local over left mismatch budgets reservations fail=0
    over="$(PSQL -c 'SELECT count(*) FROM budgets WHERE cap IS NOT NULL AND reserved + spent > cap')"
    left="$(PSQL -c 'SELECT count(*) FROM budgets WHERE reserved <> 0')"
    mismatch="$(PSQL -c "
        WITH per AS (
            SELECT bid, sum(act) AS sp FROM (
                SELECT unnest(budget_ids) AS bid, coalesce(actual, 0) AS act FROM reservations
                WHERE status IN ('committed', 'expired')
                UNION ALL
                SELECT global_budget_id, coalesce(global_actual, 0) FROM reservations
                WHERE status IN ('committed', 'expired') AND global_budget_id IS NOT NULL) x
            GROUP BY bid)
        SELECT count(*) FROM budgets b LEFT JOIN per ON per.bid = b.id
        WHERE b.spent <> coalesce(per.sp, 0)")"
    budgets="$(PSQL -c 'SELECT count(*) FROM budgets')"
    reservations="$(PSQL -c 'SELECT count(*) FROM reservations')"

    check() { # check NAME COUNT
        if [ "$2" = 0 ]; then echo "  ok   $1"; else echo "  FAIL $1: $2 budget row(s)"; fail=1; fi
    }
    echo "invariants over $budgets budget rows and $reservations reservations:"
    check "reserved + spent <= cap (where cap is set)" "$over"
    check "reserved = 0 after the run" "$left"
    check "spent = sum of committed/expired actual per budget" "$mismatch"
    if [ "$reservations" = 0 ]; then
        echo "  FAIL no reservation was made: did any request reach the gateway's ledger?"
        fail=1
    fi
    [ "$fail" = 0 ] || return 1
    echo "bench: ZERO OVERSPEND: all ledger invariants hold"
}

# `scripts/bench.sh check-ledger` (with DATABASE_URL set): only run the SQL checks.
if [ "${1:-}" = check-ledger ]; then
    [ -n "${DATABASE_URL:-}" ] || die "check-ledger needs DATABASE_URL"
    trap - EXIT
    check_ledger
    exit
fi

rm -rf "$RUN" && mkdir -p "$RUN" "$BIN"

# ---------------------------------------------------------------------------------------------
# build

if [ -n "${BENCH_SKIP_BUILD:-}" ]; then   # use the binaries already in .data/bench/bin
    for b in yosan yosan-mock yosan-load; do [ -x "$BIN/$b" ] || die "BENCH_SKIP_BUILD: $BIN/$b missing"; done
else
    log "building yosan, yosan-mock, yosan-load"
    go build -o "$BIN/yosan" ./cmd/yosan || die "go build ./cmd/yosan failed"
    go build -o "$BIN/yosan-mock" ./cmd/yosan-mock || die "go build ./cmd/yosan-mock failed"
    go build -o "$BIN/yosan-load" ./cmd/yosan-load || die "go build ./cmd/yosan-load failed"
fi

# From here on the run is bounded in time.
( sleep "$TIMEOUT"; printf '\nbench: error: timed out after %ss; aborting\n' "$TIMEOUT" >&2; kill -TERM $$ ) &
WATCHDOG=$!

# ---------------------------------------------------------------------------------------------
# helpers

# wait_http URL PID NAME LOG: wait until URL answers anything over HTTP (or PID dies).
wait_http() {
    local url="$1" pid="$2" name="$3" logf="$4" i code
    for i in $(seq 1 150); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$logf" >&2 || true
            die "$name exited during startup (log: $logf)"
        fi
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" 2>/dev/null || true)"
        if [ -n "$code" ] && [ "$code" != 000 ]; then return 0; fi
        sleep 0.2
    done
    tail -n 30 "$logf" >&2 || true
    die "$name did not answer on $url within 30s (log: $logf)"
}

port_free() {
    ! curl -s -o /dev/null --max-time 1 "http://$1/" 2>/dev/null
}

# json_get FIELD: read a JSON object on stdin, print its top-level FIELD (string or number).
json_get() {
    local f="$1" body
    body="$(cat)"
    if command -v jq >/dev/null 2>&1; then
        printf '%s' "$body" | jq -r --arg f "$f" 'if type == "object" then (.[$f] // empty) else empty end | tostring'
    else
        printf '%s' "$body" | tr -d '\n' |
            sed -n 's/^[[:space:]]*{.*"'"$f"'"[[:space:]]*:[[:space:]]*"\{0,1\}\([^",}]*\)"\{0,1\}.*/\1/p' | head -n1
    fi
}

# admin METHOD PATH [JSON]: call the admin API; print the response body; die unless 2xx.
admin() {
    local method="$1" path="$2" data="${3:-}" resp code body
    resp="$(curl -sS --max-time 15 -X "$method" \
        -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
        ${data:+--data "$data"} -w '\n%{http_code}' "http://$GW_ADDR$path")" \
        || die "admin API $method $path: request failed"
    code="${resp##*$'\n'}"
    body="${resp%$'\n'*}"
    case "$code" in
        2??) printf '%s' "$body" ;;
        *) die "admin API $method $path -> HTTP $code: $body" ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# database, mock, gateway

log "resetting database $DB"
DATABASE_URL="$(scripts/pg.sh reset "$DB")" || die "could not prepare the database"
export DATABASE_URL
echo "DATABASE_URL=$DATABASE_URL" >&2

port_free "$MOCK_ADDR" || die "something already listens on $MOCK_ADDR (set BENCH_MOCK_ADDR)"
port_free "$GW_ADDR" || die "something already listens on $GW_ADDR (set BENCH_GW_ADDR)"

MOCK_KEY="bench-mock-key"
log "starting yosan-mock on $MOCK_ADDR"
# shellcheck disable=SC2086 # BENCH_MOCK_ARGS is a list of flags
"$BIN/yosan-mock" -addr "$MOCK_ADDR" -api-key "$MOCK_KEY" ${BENCH_MOCK_ARGS:--prompt-tokens 8 -completion-tokens 16} >"$RUN/mock.log" 2>&1 </dev/null &
PIDS+=($!)
wait_http "http://$MOCK_ADDR/v1/models" "${PIDS[-1]}" yosan-mock "$RUN/mock.log"

CONFIG="$RUN/yosan.yaml"
cat >"$CONFIG" <<EOF
providers:
  - name: mock
    type: openai
    base_url: http://$MOCK_ADDR/v1
    api_key_env: MOCK_API_KEY
models:
  - name: bench-model
    provider: mock
    upstream_model: bench-model
    tier: free
    max_output_tokens: 256
    price: {input: "0.15", output: "0.60"}   # USD per 1M tokens
EOF
if [ -n "${BENCH_SETTLE_ASYNC:-}" ]; then   # measure the settle-after-the-answer mode
    echo "settle_async: true" >>"$CONFIG"
fi

ADMIN_TOKEN="$(od -An -vtx1 -N32 /dev/urandom | tr -d ' \n')"
log "starting yosan serve on $GW_ADDR"
env -u YOSAN_DEMO -u YOSAN_DEMO_KEY \
    YOSAN_ADDR="$GW_ADDR" YOSAN_CONFIG="$CONFIG" YOSAN_ADMIN_TOKEN="$ADMIN_TOKEN" \
    DATABASE_URL="$DATABASE_URL" MOCK_API_KEY="$MOCK_KEY" \
    "$BIN/yosan" serve >"$RUN/yosan.log" 2>&1 </dev/null &
PIDS+=($!)
wait_http "http://$GW_ADDR/" "${PIDS[-1]}" yosan "$RUN/yosan.log"

log "creating org, team, key and a strict org budget (cap $CAP) through the admin API"
ORG="$(admin POST /admin/v1/orgs '{"name":"bench"}' | json_get id)"
[ -n "$ORG" ] || die "POST /admin/v1/orgs returned no id"
TEAM="$(admin POST "/admin/v1/orgs/$ORG/teams" '{"name":"t"}' | json_get id)"
[ -n "$TEAM" ] || die "POST /admin/v1/orgs/$ORG/teams returned no id"
case "$TEAM" in *[!0-9]*) TEAM_JSON="\"$TEAM\"" ;; *) TEAM_JSON="$TEAM" ;; esac
KEY="$(admin POST "/admin/v1/orgs/$ORG/keys" "{\"name\":\"k\",\"team_id\":$TEAM_JSON,\"plan\":\"free\"}" | json_get key)"
[ -n "$KEY" ] || die "POST /admin/v1/orgs/$ORG/keys returned no key"
admin PUT "/admin/v1/budgets/org/$ORG" "{\"cap\":\"$CAP\"}" >/dev/null
echo "org=$ORG team=$TEAM key=${KEY:0:14}..." >&2

# ---------------------------------------------------------------------------------------------
# load

DIRECT_URL="http://$MOCK_ADDR/v1/chat/completions"
GW_URL="http://$GW_ADDR/v1/chat/completions"

load() { # load LABEL URL KEY ARGS...
    local label="$1" url="$2" key="$3"
    shift 3
    "$BIN/yosan-load" -url "$url" -key "$key" -label "$label" -out "$RUN/$label.json" "$@"
}

warmup() {
    [ "$WARMUP" = 0 ] && return 0
    "$BIN/yosan-load" -url "$1" -key "$2" -mode closed -workers 8 -duration "$WARMUP" >/dev/null
}

log "warming up"
warmup "$DIRECT_URL" "$MOCK_KEY"
warmup "$GW_URL" "$KEY"

log "constant rate: $RATE req/s for $DURATION"
load direct-rate "$DIRECT_URL" "$MOCK_KEY" -mode rate -rate "$RATE" -duration "$DURATION"
sleep 1
load gateway-rate "$GW_URL" "$KEY" -mode rate -rate "$RATE" -duration "$DURATION"
sleep 1
log "closed loop: $WORKERS workers for $DURATION"
load direct-closed "$DIRECT_URL" "$MOCK_KEY" -mode closed -workers "$WORKERS" -duration "$DURATION"
sleep 1
load gateway-closed "$GW_URL" "$KEY" -mode closed -workers "$WORKERS" -duration "$DURATION"

log "results (latencies of 2xx responses, ms)"
"$BIN/yosan-load" -table "$RUN/direct-rate.json,$RUN/gateway-rate.json,$RUN/direct-closed.json,$RUN/gateway-closed.json"
echo
"$BIN/yosan-load" -compare "$RUN/direct-rate.json,$RUN/gateway-rate.json"
"$BIN/yosan-load" -compare "$RUN/direct-closed.json,$RUN/gateway-closed.json"

# The cap above is large so the measurements above see only admitted requests. Now make it
# bite: leave room for about EXHAUST_ROOM yen more and hammer the hot org until it is full, so
# the ledger check below proves that a cap actually reached under full load was not overspent.
EXHAUST_ROOM="${BENCH_EXHAUST_ROOM:-20}"
log "exhausting the org budget: cap = spent + $EXHAUST_ROOM JPY, closed loop $WORKERS workers for 5s"
SPENT="$(admin GET "/admin/v1/budgets/org/$ORG" | json_get spent)"
NEWCAP="$(awk -v s="$SPENT" -v r="$EXHAUST_ROOM" 'BEGIN { printf "%.6f", s + r }')"
admin PUT "/admin/v1/budgets/org/$ORG" "{\"cap\":\"$NEWCAP\"}" >/dev/null
load gateway-exhaust "$GW_URL" "$KEY" -mode closed -workers "$WORKERS" -duration 5s
sleep 1
echo "org budget after exhaustion: $(admin GET "/admin/v1/budgets/org/$ORG")"

# ---------------------------------------------------------------------------------------------
# the ledger

if ! check_ledger; then
    echo "logs and JSON results: $RUN"
    die "ledger invariants violated"
fi
echo "logs and JSON results: $RUN"
