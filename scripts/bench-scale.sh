#!/usr/bin/env bash
# Idle connections and one fan-out at scale on one machine: N subscribed connections (100,000 by
# default) spread evenly over REPLICAS `serve` replicas on one database, heartbeats running at their
# default interval. Each replica has one load generator of its own (ballet-bench --mode idle, dialing
# from the loopback addresses SOURCE_ADDRS in turn, so that the ephemeral ports do not run out). It
# measures:
#
#   - the time to connect (dial, auth, subscribe) every connection, the generators in parallel;
#   - per replica: RSS before, right after all are connected (and SETTLE), and after holding them
#     HOLD with heartbeats running; the replica's CPU over the hold (heartbeats only), its descriptors;
#   - one fan-out: one event of the connections' stream, inserted with plain SQL; the time from its
#     COMMIT being sent (the database's clock, read just before it in the same session) to the first
#     and last connection of each replica receiving it, and the connections that never did; the CPU
#     of each replica and of its generator from the commit to its last connection's receipt.
#
# Usage: scripts/bench-scale.sh
#
# Every address is on loopback. A process holds at most `ulimit -Hn` descriptors: a replica needs its
# connections plus a few dozen of its own, and a generator its connections plus a few. It needs go,
# jq, curl, psql, createdb and dropdb, and PostgreSQL at $PGURL (a role that may create databases).
# It creates a throwaway database, runs `ballet-gateway dev` as the token issuer, and removes all of
# it when it ends; every wait is bounded.
#
# Environment:
#   PGURL         PostgreSQL server (default postgres://postgres@127.0.0.1:5432)
#   N             connections in all (default 100000)
#   REPLICAS      serve replicas, each with N / REPLICAS connections (default 6)
#   PORT          the first replica's port; replica i listens on PORT+2i, its admin port PORT+2i+1; dev on
#                 PORT+100 and PORT+101 (default 9100)
#   SOURCE_ADDRS  the generators' local addresses (default 127.0.0.2-127.0.0.9)
#   HOLD          seconds all connections are held before the fan-out (default 75; the RSS after it)
#   SETTLE        wait after the last connection before the first RSS (default 5s)
#   CODEC         msgpack (default) or json
#   CONNECT_MAX   the longest the connections may take, in seconds (default 900)
#   SERVE_ENV     more VAR=value settings for every replica
#   OUT           directory for the reports and logs (default: a new temporary one)
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
N=${N:-100000}
REPLICAS=${REPLICAS:-6}
PORT=${PORT:-9100}
SOURCE_ADDRS=${SOURCE_ADDRS:-127.0.0.2-127.0.0.9}
HOLD=${HOLD:-75}
SETTLE=${SETTLE:-5s}
CODEC=${CODEC:-msgpack}
CONNECT_MAX=${CONNECT_MAX:-900}
OUT=${OUT:-$(mktemp -d -t ballet-scale.XXXXXX)}

for cmd in go jq curl psql createdb dropdb; do
	command -v "$cmd" >/dev/null || {
		echo "$0: $cmd is needed" >&2
		exit 2
	}
done
case $SOURCE_ADDRS in 127.*) ;; *)
	echo "$0: SOURCE_ADDRS must be loopback addresses (127.x.y.z)" >&2
	exit 2
	;;
esac
case $PGURL in postgres://*@127.* | postgres://*@localhost* | postgres://127.* | postgres://localhost*) ;; *)
	echo "$0: PGURL must be a PostgreSQL server on loopback (postgres://USER@127.0.0.1:PORT)" >&2
	exit 2
	;;
esac

cd "$(dirname "$0")/.."
mkdir -p "$OUT/bin"
BIN=$OUT/bin
DB=ballet_scale_$$
DBURL=$PGURL/$DB
DEV=127.0.0.1:$((PORT + 100))
DEV_ADMIN=127.0.0.1:$((PORT + 101))
CLK_TCK=$(getconf CLK_TCK)
HARD=$(ulimit -Hn)
PER=$(((N + REPLICAS - 1) / REPLICAS))
# What a replica holds besides its client sockets: stdio, listeners, pollers, Postgres, logs.
OWN_FDS=64
DEV_PID=
SAMPLER_PID=
SERVE_PIDS=()
GEN_PIDS=()

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

if [ "$HARD" != unlimited ] && [ $((PER + OWN_FDS)) -gt "$HARD" ]; then
	echo "$0: $REPLICAS replicas of $PER connections: each needs about $((PER + OWN_FDS)) descriptors," \
		"over this machine's limit of $HARD a process (ulimit -Hn), with a margin; raise REPLICAS" >&2
	exit 2
fi

cleanup() {
	for pid in $SAMPLER_PID "${GEN_PIDS[@]}" "${SERVE_PIDS[@]}" $DEV_PID; do
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
BALLET_DATABASE_URL=$DBURL "$GW" admin grant BENCH bench viewer >/dev/null

env -u GOGC BALLET_ADDR="$DEV" BALLET_ADMIN_ADDR="$DEV_ADMIN" BALLET_LOG_LEVEL=WARN "$GW" dev >"$OUT/dev.log" 2>&1 &
DEV_PID=$!
TOKEN_URL="http://$DEV/dev/token?subject=bench"
for _ in $(seq 100); do
	curl -fs "$TOKEN_URL" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fs "$TOKEN_URL" >/dev/null || {
	echo "$0: dev did not start (see $OUT/dev.log)" >&2
	exit 1
}

# The replicas: every connection is the one subject "bench" from a few addresses, so the per-subject
# and per-address budgets are raised past what the load needs; nothing else is changed.
for i in $(seq 0 $((REPLICAS - 1))); do
	# shellcheck disable=SC2086 # VAR=value words, or nothing
	env -u GOGC ${SERVE_ENV:-} \
		BALLET_DATABASE_URL="$DBURL" \
		BALLET_ADDR="127.0.0.1:$((PORT + 2 * i))" BALLET_ADMIN_ADDR="127.0.0.1:$((PORT + 2 * i + 1))" \
		BALLET_OIDC_ISSUER="http://$DEV/dev/oidc" BALLET_OIDC_AUDIENCE=ballet-dev \
		BALLET_MAX_CONNECTIONS=$((PER + 100)) BALLET_MAX_CONNECTIONS_PER_SUBJECT=$((PER + 100)) \
		BALLET_MAX_CONNECTIONS_PER_IP=1000 BALLET_ADDR_RATE=1000000 \
		BALLET_SUBJECT_REQUEST_RATE=1000000 BALLET_LOG_LEVEL=WARN \
		"$GW" serve >"$OUT/serve-$i.log" 2>&1 &
	SERVE_PIDS+=($!)
done
for i in $(seq 0 $((REPLICAS - 1))); do
	for _ in $(seq 300); do
		curl -fs "http://127.0.0.1:$((PORT + 2 * i + 1))/readyz" >/dev/null 2>&1 && continue 2
		kill -0 "${SERVE_PIDS[$i]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "$0: replica $i did not start (see $OUT/serve-$i.log)" >&2
	exit 1
done

ticks() {
	local stat
	stat=$(cut -d' ' -f14,15 "/proc/$1/stat")
	echo $((${stat% *} + ${stat#* }))
}
rss() { awk '$1 == "VmRSS:" { print $2 * 1024 }' "/proc/$1/status"; }
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

declare -A RSS0 FDS0 RSS1 RSS2 CPU T_FDS
for i in $(seq 0 $((REPLICAS - 1))); do
	RSS0[$i]=$(rss "${SERVE_PIDS[$i]}")
	FDS0[$i]=$(fds "${SERVE_PIDS[$i]}")
done

# The generators: one a replica, all at once. Each holds its connections at least HOLD, then waits
# for the fan-out's event (at most the rest of the run).
log "$N connections ($CODEC) to $REPLICAS replicas of $PER, from $SOURCE_ADDRS"
wait_s=$((CONNECT_MAX + HOLD + 120))
t_start=$(date +%s%3N)
left=$N
for i in $(seq 0 $((REPLICAS - 1))); do
	n=$((left < PER ? left : PER))
	left=$((left - n))
	"$BIN/ballet-bench" --url "ws://127.0.0.1:$((PORT + 2 * i))/rpc" --token-url "$TOKEN_URL" --json \
		--codec "$CODEC" --mode idle --subscribers "$n" --duration "${HOLD}s" --settle "$SETTLE" \
		--server-pid "${SERVE_PIDS[$i]}" --source-addrs "$SOURCE_ADDRS" \
		--fanout-events 1 --grace "${wait_s}s" >"$OUT/gen-$i.json" 2>"$OUT/gen-$i.log" &
	GEN_PIDS+=($!)
done

# All connected: every generator holds its connections (or one has given up).
deadline=$(($(date +%s) + CONNECT_MAX))
while :; do
	held=0
	for i in $(seq 0 $((REPLICAS - 1))); do
		grep -q "holding the connections" "$OUT/gen-$i.log" && held=$((held + 1))
		if ! kill -0 "${GEN_PIDS[$i]}" 2>/dev/null; then
			echo "$0: generator $i stopped before holding its connections:" >&2
			cat "$OUT/gen-$i.log" "$OUT/gen-$i.json" >&2
			exit 1
		fi
	done
	[ "$held" -eq "$REPLICAS" ] && break
	if [ "$(date +%s)" -ge "$deadline" ]; then
		echo "$0: not connected after ${CONNECT_MAX}s" >&2
		exit 1
	fi
	sleep 0.2
done
t_connected=$(date +%s%3N)
log "all connected after $(((t_connected - t_start) / 1000)) s; load $(cut -d' ' -f1 /proc/loadavg)"
sleep "$SETTLE"
declare -A TICKS0
for i in $(seq 0 $((REPLICAS - 1))); do
	RSS1[$i]=$(rss "${SERVE_PIDS[$i]}")
	TICKS0[$i]=$(ticks "${SERVE_PIDS[$i]}")
done
t_hold0=$(date +%s%3N)
log "holding ${HOLD}s with heartbeats"
sleep "$HOLD"
t_hold1=$(date +%s%3N)
for i in $(seq 0 $((REPLICAS - 1))); do
	RSS2[$i]=$(rss "${SERVE_PIDS[$i]}")
	CPU[$i]=$(awk -v d=$(($(ticks "${SERVE_PIDS[$i]}") - TICKS0[$i])) -v hz="$CLK_TCK" -v ms=$((t_hold1 - t_hold0)) \
		'BEGIN { printf "%.2f", 100 * d / hz / (ms / 1000) }')
	T_FDS[$i]=$(fds "${SERVE_PIDS[$i]}")
done
load_hold=$(cut -d' ' -f1 /proc/loadavg)

# cpu_samples writes "unix-ms" and the CPU ticks of every replica, then of every generator, every
# 50 ms until it is stopped: the CPU each side spent on the fan-out.
cpu_samples() {
	local line pid f
	while :; do
		line=$((${EPOCHREALTIME/./} / 1000))
		for pid in "${SERVE_PIDS[@]}" "${GEN_PIDS[@]}"; do
			if read -r -a f <"/proc/$pid/stat" 2>/dev/null; then
				line="$line $((f[13] + f[14]))"
			else
				line="$line null"
			fi
		done
		echo "$line"
		sleep 0.05
	done >"$OUT/fanout-cpu.txt"
}
cpu_samples &
SAMPLER_PID=$!

# The fan-out: one event in an explicit transaction. The database's clock is read by the statement
# before COMMIT and by the one after it, so the times from the first are upper bounds, and the
# COMMIT's own time (its WAL flush) is the difference.
log "one event to all $N"
mapfile -t commit < <(psql -X -q -At -v ON_ERROR_STOP=1 "$DBURL" -c "BEGIN" \
	-c "INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
		VALUES ('BENCH', 'bench.event', 'bench', 'scale', 'scale', 'service', 'bench-scale', '{}')" \
	-c "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint" -c "COMMIT" \
	-c "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
commit_ms=${commit[0]}
commit_took_ms=$((commit[1] - commit[0]))
for i in $(seq 0 $((REPLICAS - 1))); do
	wait "${GEN_PIDS[$i]}" || true
done
GEN_PIDS=()
sleep 0.2
kill "$SAMPLER_PID" 2>/dev/null && wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=

# fanout_cpu I COLUMN_OFFSET LAST_MS: the CPU seconds of the process in column I (+ offset) from the
# last sample before the commit to the first sample after LAST_MS past it.
fanout_cpu() {
	awk -v col=$(($1 + $2 + 2)) -v c="$commit_ms" -v last="$3" -v hz="$CLK_TCK" '
		$1 <= c && $col != "null" { a = $col }
		$1 >= c + last && $col != "null" && b == "" { b = $col }
		END { if (a != "" && b != "") printf "%.2f", (b - a) / hz; else print "null" }' "$OUT/fanout-cpu.txt"
}

# The report: one JSON line a replica, then the totals.
for i in $(seq 0 $((REPLICAS - 1))); do
	last=$(jq '(.fanout_last_unix_ms // 0) - '"$commit_ms"' | ceil' "$OUT/gen-$i.json")
	jq -c --argjson i "$i" --argjson c "$commit_ms" \
		--argjson scpu "$(fanout_cpu "$i" 0 "$last")" --argjson gcpu "$(fanout_cpu "$i" "$REPLICAS" "$last")" --argjson rss0 "${RSS0[$i]}" --argjson rss1 "${RSS1[$i]}" \
		--argjson rss2 "${RSS2[$i]}" --argjson cpu "${CPU[$i]}" --argjson fds0 "${FDS0[$i]}" \
		--argjson fds "${T_FDS[$i]}" \
		'{replica: $i, ok, failures, connections, connect_s, connect_p99_ms, server_rss_start_bytes: $rss0,
		  server_rss_connected_bytes: $rss1, server_rss_held_bytes: $rss2,
		  per_conn_connected_bytes: (($rss1 - $rss0) / .connections), per_conn_held_bytes: (($rss2 - $rss0) / .connections),
		  server_cpu_idle_pct: $cpu, server_fds_start: $fds0, server_fds_held: $fds, client_rss_per_conn_bytes,
		  fanout_complete, fanout_missed, fanout_server_cpu_s: $scpu, fanout_generator_cpu_s: $gcpu,
		  fanout_first_ms: (if .fanout_first_unix_ms then .fanout_first_unix_ms - $c else null end),
		  fanout_last_ms: (if .fanout_last_unix_ms then .fanout_last_unix_ms - $c else null end)}' \
		"$OUT/gen-$i.json"
done | tee "$OUT/replicas.jsonl"
jq -s --argjson n "$N" --argjson connect_ms $((t_connected - t_start)) --argjson load "$load_hold" \
	--argjson commit_took "$commit_took_ms" \
	--argjson hold "$HOLD" '{
	connections: (map(.connections) | add), asked: $n, replicas: length, all_ok: all(.ok),
	connect_all_s: ($connect_ms / 1000), hold_s: $hold, load_1m_at_hold_end: $load,
	server_rss_connected_bytes: (map(.server_rss_connected_bytes) | add),
	server_rss_held_bytes: (map(.server_rss_held_bytes) | add),
	server_growth_held_bytes: (map(.server_rss_held_bytes - .server_rss_start_bytes) | add),
	per_conn_held_bytes: ((map(.server_rss_held_bytes - .server_rss_start_bytes) | add) / (map(.connections) | add)),
	server_cpu_idle_pct: (map(.server_cpu_idle_pct) | add),
	commit_took_ms: $commit_took,
	fanout_complete: (map(.fanout_complete // 0) | add), fanout_missed: (map(.fanout_missed // 0) | add),
	fanout_server_cpu_s: (map(.fanout_server_cpu_s // 0) | add),
	fanout_generator_cpu_s: (map(.fanout_generator_cpu_s // 0) | add),
	fanout_first_ms: (map(.fanout_first_ms // empty) | min), fanout_last_ms: (map(.fanout_last_ms // empty) | max)
	}' "$OUT/replicas.jsonl" | tee "$OUT/total.json"
log "reports and logs: $OUT"
jq -e '.all_ok and .fanout_missed == 0 and .connections == .asked' "$OUT/total.json" >/dev/null
