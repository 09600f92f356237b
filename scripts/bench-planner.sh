#!/usr/bin/env bash
# Planner output at scale: REPLICAS `serve` replicas on one PostgreSQL, each
# running the planner with the Anthropic provider pointed at the model that
# `ballet-bench --mode planner` serves, then one run per TURNS value, each on fresh
# replicas: that many
# turns answered at once, OUTPUTS text deltas a second for SECONDS seconds, WATCHERS
# watches of each session on replicas other than the one running its turn
# (docs/benchmarks.md, "The planner mode").
#
# Usage: scripts/bench-planner.sh
#
# Each turn is sent by one of SUBJECTS people (bench-0, bench-1, …), who created
# its session; the subject "bench", the project's admin, makes them members and
# holds every watch. The settings this needs beyond the defaults:
#
#   BALLET_REST_RATE                  REST requests a second of "bench" (default 50)
#   BALLET_SUBJECT_REQUEST_RATE, BALLET_REQUEST_RATE  the watches, all at once
#   BALLET_MAX_SUBSCRIPTIONS          watches of one connection, when beyond 256
#   pool_max_conns in BALLET_DATABASE_URL  (POOL; pgx's default is max(4, CPUs))
#
# and, when a person sends more turns than the defaults let one person run at once
# (fewer SUBJECTS than TURNS / 4), BALLET_PLANNER_TURNS_PER_SUBJECT and
# BALLET_PLANNER_SESSION_RATE above the turns of one person.
#
# It needs go, jq, curl, psql, createdb, dropdb and pgrep, and PostgreSQL at $PGURL (a
# role that may create databases). It creates a throwaway database, runs
# `ballet-gateway dev` as the token issuer on loopback, and removes all of it
# when it ends. The database's CPU (--db-pid) is that of the whole PostgreSQL
# server, other work on it included; db_backends_cpu_s is that of the backends of the
# run's database alone (without the WAL writer, the checkpointer and the like).
#
# Environment:
#   PGURL      PostgreSQL server (default postgres://postgres@127.0.0.1:5432)
#   DB_PID     its postmaster's PID (default: the oldest process named postgres)
#   REPLICAS   serve replicas (default 4); replica i listens on PORT+2i, its admin port PORT+2i+1
#   PORT       the first replica's port (default 8080); dev uses PORT+20 and PORT+21, the model PORT+30
#   TURNS      turns of each run, one run per value (default "300 1000")
#   OUTPUTS    text deltas a second of each answer (default 25)
#   TURN_SECONDS   how long each answer streams, in seconds (default 10)
#   WATCHERS   watches of each session (default 2)
#   SUBJECTS   people sending the turns of each run (default: one a turn)
#   CONNECTIONS  connections to each replica the watches share (default 4)
#   POOL       pool_max_conns of each replica (default 8)
#   SERVE_ENV  more VAR=value settings for every serve
#   OUT        directory for the raw reports and logs (default: a new temporary one)
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
REPLICAS=${REPLICAS:-4}
PORT=${PORT:-8080}
TURNS=${TURNS:-"300 1000"}
OUTPUTS=${OUTPUTS:-25}
TURN_SECONDS=${TURN_SECONDS:-10}
WATCHERS=${WATCHERS:-2}
SUBJECTS=${SUBJECTS:-}
CONNECTIONS=${CONNECTIONS:-4}
POOL=${POOL:-8}
OUT=${OUT:-$(mktemp -d -t ballet-planner.XXXXXX)}

for cmd in go jq curl psql createdb dropdb pgrep; do
	command -v "$cmd" >/dev/null || {
		echo "$0: $cmd is needed" >&2
		exit 2
	}
done
DB_PID=${DB_PID:-$(pgrep -o -x postgres || true)}
[ -n "$DB_PID" ] || {
	echo "$0: no PostgreSQL process found; set DB_PID" >&2
	exit 2
}

cd "$(dirname "$0")/.."
mkdir -p "$OUT/bin"
BIN=$OUT/bin
DB=ballet_planner_$$
DBURL=$PGURL/$DB
DEV=127.0.0.1:$((PORT + 20))
DEV_ADMIN=127.0.0.1:$((PORT + 21))
MODEL=127.0.0.1:$((PORT + 30))
DEV_PID= SERVE_PIDS=() URLS=

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

cleanup() {
	for pid in "${SERVE_PIDS[@]}" $DEV_PID; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	done
	dropdb --if-exists --maintenance-db="$PGURL/postgres" "$DB" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building ballet-bench and ballet-gateway into $BIN"
go build -o "$BIN/ballet-bench" ./cmd/ballet-bench
go build -o "$BIN/ballet-gateway" ./cmd/ballet-gateway
GW=$BIN/ballet-gateway

log "database $DB"
createdb --maintenance-db="$PGURL/postgres" "$DB"
BALLET_DATABASE_URL=$DBURL "$GW" migrate >/dev/null
BALLET_DATABASE_URL=$DBURL "$GW" admin project-create BENCH Bench >/dev/null
BALLET_DATABASE_URL=$DBURL "$GW" admin grant BENCH bench admin >/dev/null

BALLET_ADDR="$DEV" BALLET_ADMIN_ADDR="$DEV_ADMIN" BALLET_LOG_LEVEL=WARN "$GW" dev >"$OUT/dev.log" 2>&1 &
DEV_PID=$!
TOKEN_URL="http://$DEV/dev/token?subject=bench"

# wait_up URL NAME LOG waits up to 30 s for URL to answer, else exits.
wait_up() {
	for _ in $(seq 300); do
		curl -fs "$1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$0: $2 did not start (see $3)" >&2
	exit 1
}
wait_up "$TOKEN_URL" dev "$OUT/dev.log"

max_turns=0
for n in $TURNS; do
	[ "$n" -gt "$max_turns" ] && max_turns=$n
done
# Watches of one connection: all a replica's watches over its connections.
subs=$(((max_turns * WATCHERS + REPLICAS * CONNECTIONS - 1) / (REPLICAS * CONNECTIONS) + 16))
[ "$subs" -lt 256 ] && subs=256
# Turns of one person, at most: beyond the defaults (4 running, 30 sessions a minute), raise them.
per=1
[ -n "$SUBJECTS" ] && per=$(((max_turns + SUBJECTS - 1) / SUBJECTS))
PERSON_ENV=
[ "$per" -gt 4 ] && PERSON_ENV="BALLET_PLANNER_TURNS_PER_SUBJECT=$((per + 1)) BALLET_PLANNER_SESSION_RATE=$((per + 1))"

# start_replicas starts REPLICAS fresh replicas and waits until they are ready.
start_replicas() {
	URLS= SERVE_PIDS=()
	local i addr
	for i in $(seq 0 $((REPLICAS - 1))); do
		addr=127.0.0.1:$((PORT + 2 * i))
		# shellcheck disable=SC2086 # VAR=value words, or nothing
		env $PERSON_ENV ${SERVE_ENV:-} \
			BALLET_DATABASE_URL="$DBURL?pool_max_conns=$POOL" BALLET_ADDR="$addr" \
			BALLET_ADMIN_ADDR="127.0.0.1:$((PORT + 2 * i + 1))" \
			BALLET_OIDC_ISSUER="http://$DEV/dev/oidc" BALLET_OIDC_AUDIENCE=ballet-dev BALLET_LOG_LEVEL=WARN \
			BALLET_PLANNER_PROVIDER=anthropic BALLET_PLANNER_BASE_URL="http://$MODEL" BALLET_PLANNER_API_KEY=bench \
			BALLET_REST_RATE=100000 BALLET_SUBJECT_REQUEST_RATE=1000000 BALLET_REQUEST_RATE=1000000 \
			BALLET_MAX_SUBSCRIPTIONS=$subs BALLET_ADDR_RATE=1000000 BALLET_MAX_CONNECTIONS_PER_IP=100000 \
			BALLET_REST_LISTINGS_PER_SUBJECT=1000 BALLET_REST_MAX_LISTINGS=1000 \
			"$GW" serve >>"$OUT/serve-$i.log" 2>&1 &
		SERVE_PIDS+=($!)
		URLS=${URLS:+$URLS,}ws://$addr/rpc
	done
	for i in $(seq 0 $((REPLICAS - 1))); do
		wait_up "http://127.0.0.1:$((PORT + 2 * i + 1))/readyz" "serve $i" "$OUT/serve-$i.log"
	done
}

stop_replicas() {
	local pid
	for pid in "${SERVE_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	SERVE_PIDS=()
}

# ticks PID prints the CPU time the process has used, in clock ticks.
ticks() {
	local stat
	stat=$(cut -d' ' -f14,15 "/proc/$1/stat")
	echo $((${stat% *} + ${stat#* }))
}

# serve_ticks prints the CPU time of all replicas, in clock ticks.
serve_ticks() {
	local sum=0 pid
	for pid in "${SERVE_PIDS[@]}"; do
		sum=$((sum + $(ticks "$pid")))
	done
	echo "$sum"
}

# child_ticks prints the CPU time of this shell's waited-for children, in clock ticks.
child_ticks() {
	local stat
	stat=$(cut -d' ' -f16,17 "/proc/$$/stat")
	echo $((${stat% *} + ${stat#* }))
}

# db_ticks prints "PID TICKS" for every backend of the run's database.
db_ticks() {
	local pid t
	for pid in $(psql -X "$PGURL/postgres" -Atc "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'"); do
		t=$(ticks "$pid" 2>/dev/null) && echo "$pid $t"
	done
}

# db_own_s BEFORE AFTER prints the CPU seconds the database's backends used between two
# db_ticks readings (a backend that ended between them is missed).
db_own_s() {
	awk -v hz="$CLK_TCK" 'NR == FNR { b[$1] = $2; next } { d += $2 - b[$1] } END { printf "%.2f", d / hz }' "$1" "$2"
}

CLK_TCK=$(getconf CLK_TCK)
for n in $TURNS; do
	raw=$OUT/planner-$n.json
	people=${SUBJECTS:-$n}
	[ "$people" -gt "$n" ] && people=$n
	start_replicas
	log "$n turns x $OUTPUTS/s x ${TURN_SECONDS}s by $people people, $WATCHERS watchers each, on $URLS"
	db_ticks >"$OUT/db-$n.before"
	s0=$(serve_ticks) b0=$(child_ticks)
	"$BIN/ballet-bench" --mode planner --url "$URLS" --token-url "$TOKEN_URL" --model-listen "$MODEL" \
		--turns "$n" --outputs-per-second "$OUTPUTS" --turn-seconds "$TURN_SECONDS" --watchers "$WATCHERS" \
		--connections "$CONNECTIONS" --subjects "$people" \
		--subject-token-url "http://$DEV/dev/token?subject={subject}" --db-pid "$DB_PID" --json >"$raw" 2>>"$OUT/bench.log" || true
	s1=$(serve_ticks) b1=$(child_ticks)
	db_ticks >"$OUT/db-$n.after"
	stop_replicas
	if [ ! -s "$raw" ]; then
		log "  no report (see $OUT/bench.log)"
		continue
	fi
	jq -c --argjson load "$(cut -d' ' -f1 /proc/loadavg)" --argjson pool "$POOL" \
		--argjson serve "$(awk -v d=$((s1 - s0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')" \
		--argjson own "$(db_own_s "$OUT/db-$n.before" "$OUT/db-$n.after")" \
		--argjson bench "$(awk -v d=$((b1 - b0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')" \
		'. + {load_1m: $load, pool_max_conns: $pool, replicas_cpu_s: $serve, bench_cpu_s: $bench,
		db_backends_cpu_s: $own}' "$raw" |
		tee -a "$OUT/results.jsonl" |
		jq -r '"  p50 \(.latency_p50_ms) ms, p99 \(.latency_p99_ms) ms, max \(.latency_max_ms) ms; " +
			"sends \(.sends_s) s, turns began over \(.model_requests_spread_s) s; \(.delivered_deltas)/\(.expected_deliveries) delivered, \(.deliveries_per_s | round)/s; gaps \(.gaps), " +
			"duplicates \(.duplicates), turns without done \(.turns_without_done); " +
			"CPU: database \(.db_cpu_ms / 1000) s (its backends \(.db_backends_cpu_s) s), replicas \(.replicas_cpu_s) s, bench \(.bench_cpu_s) s; load \(.load_1m)" +
			(if .ok then "" else "; FAILED: " + (.failures | join("; ")) end)' >&2
done
echo "raw reports: $OUT/results.jsonl"
