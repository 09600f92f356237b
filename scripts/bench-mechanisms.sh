#!/usr/bin/env bash
# Each mechanism that exists for speed, measured on its own: the gateway
# built (or run) with and without it, the runs alternating, every run's
# figure printed (docs/benchmarks/, "Each mechanism on its own"). The
# default build's runs are also the current figures against the targets.
#
# Usage: scripts/bench-mechanisms.sh [idle] [liveheap] [latency] [saturate] [rates] [codecs] [single] [replay]
#        [burst]
#        (idle, latency and saturate by default)
#
#   idle      IDLE_N idle subscribed connections held HOLD, a fresh serve each
#             run: server RSS per connection after connecting and after the
#             hold, and the server's CPU while they are held
#   liveheap  the same connections held 20 s: the live heap per connection
#             (a forced collection before and after connecting; RSS varies
#             with the collector's timing, the live heap hardly does)
#   latency   1000 subscribers x 100 events/s for 10 s: p50, p99, gaps, and
#             the server's CPU per delivery
#   saturate  1000 subscribers, the writer as fast as they take it:
#             deliveries/s, and the server's CPU per delivery
#   rates     the latency run at each of RATES events/s, the default build in
#             both codecs: latency and CPU against the rate (one writer commits
#             one event a transaction: on a 2-core machine with fsync on it
#             tops out near 290 a second, and the summary says when it fell
#             short of the rate asked)
#   codecs    the default build in both codecs, alternating: the overload run
#             (1000 subscribers x 1000 events/s in commits of 50 for 10 s:
#             deliveries/s, p99, the server's CPU per delivery), the
#             saturate run and the single run (1000 subscribers x 400
#             single-event commits/s from SINGLE_WRITERS writers for 10 s:
#             p99, the server's CPU per delivery); the summary ends with
#             JSON's figures as a share of MessagePack's (the medians of each)
#   single    the single run alone, in both codecs
#   replay    in both codecs: one client's replay of 1000 events, 200 times (replay p99), and
#             the replay storm (1000 clients reconnect at once 1000 events behind: the time
#             until all caught up, gaps, duplicates)
#   burst     in both codecs, each a fresh serve, one transaction of many events (ballet-bench
#             --mode burst, the server's RSS every 10 ms): burst1, 2,000 events of 2 KB to 1,000
#             subscribers; burst2, 2,000 events of 80 KB to 1 subscriber reading and 10 not reading
#             until it has them all; burst3, 5,000 events of 2 KB to 1,000 subscribers not reading
#             for BURST_PAUSE: deliveries/s, the server's CPU per delivery, its peak RSS growth,
#             subscribers that got every event once, lagging closes and disconnects
#
# Variants (build tags of ./cmd/ballet-gateway, or an environment variable):
#
#   default     the build as shipped (GOGC=75, set by serve)
#   nopark      -tags nopark: every connection keeps a reader goroutine
#   nofd        -tags nofd: sockets served by net and the Go runtime's poller, not by their descriptor
#   notimerheap -tags notimerheap: a runtime timer per session instead of one heap of heartbeat deadlines
#   gogc100     GOGC=100: the runtime's default collector target
#   nodirect    -tags nodirect: every frame goes through the connection's writer goroutine
#   noparallel  -tags noparallel: a stream's subscribers are served on the dispatch's goroutine alone
#   trace001    tracing on, OTEL_TRACES_SAMPLER_ARG=0.01 (parentbased_traceidratio), spans to a sink
#   trace1      tracing on at 1: every request a span (the sink answers OTLP/HTTP and keeps nothing;
#               it needs python3)
#
# Every run starts a fresh serve; each report line also gives the 1-minute
# load average at its end, since other work on the machine moves the
# figures. It needs go, jq, curl, createdb and dropdb, and PostgreSQL at
# $PGURL (a role that may create databases). It creates a throwaway
# database, runs `ballet-gateway dev` as the token issuer on loopback, and
# removes all of it when it ends. Nothing here is a setting of a
# production build.
#
# Environment:
#   PGURL      PostgreSQL server (default postgres://postgres@127.0.0.1:5432)
#   RUNS       rounds; each runs every variant of each target once (default 2)
#   PORT       serve's port; its admin port is PORT+1, dev's PORT+10 and PORT+11, the trace
#              sink's PORT+20 (default 8080)
#   IDLE_N     idle connections (default 9000); HOLD, how long idle runs hold them (default 90s)
#   VARIANTS_IDLE  variant:codec pairs of idle and liveheap runs (default below)
#   VARIANTS_LIVE  variant:codec pairs of latency and saturate runs (default below)
#   TRANSPORTS the subscribers' transports of the idle, liveheap, latency and saturate runs, each
#              pair run with each in turn: websocket (GET /rpc), http (POST /rpc, JSON pairs only;
#              the summary then ends with HTTP's figures as a share of the WebSocket's) (default
#              websocket)
#   RATES      events/s of the rates runs (default "50 100 200 400 800")
#   SINGLE_WRITERS  writers of the single runs (default 4: one writer commits fewer than 400
#              single-event transactions a second)
#   SERVE_ENV  more VAR=value settings for every serve, e.g. BALLET_HEARTBEAT_INTERVAL=1s
#   PROFILE    seconds of a CPU profile of each serve, taken from 4 s into its run, kept as
#              OUT/NAME.pprof (default none; serve runs with BALLET_PPROF=true)
#   BENCH_ARGS more flags for every ballet-bench run, e.g. --ws-client library
#   HEAPS      seconds to take a heap profile of each serve every second of, kept as
#              OUT/NAME-heap-N.pprof: where a peak of memory goes (default none)
#   BURSTS     the burst runs (default "1 2 3"); BURST_CODECS their codecs (default "msgpack json")
#   BURST_PAUSE  how long burst3's subscribers stop reading after the commit (default 10s)
#   BURST_DIV  divides the bursts' subscribers and events, for a quick try (default 1)
#   OUT        directory for the raw reports and logs (default: a new temporary one)
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
RUNS=${RUNS:-2}
PORT=${PORT:-8080}
IDLE_N=${IDLE_N:-9000}
HOLD=${HOLD:-90s}
VARIANTS_IDLE=${VARIANTS_IDLE:-"default:msgpack nopark:msgpack notimerheap:msgpack gogc100:msgpack default:json"}
VARIANTS_LIVE=${VARIANTS_LIVE:-"default:msgpack nodirect:msgpack noparallel:msgpack default:json"}
TRANSPORTS=${TRANSPORTS:-websocket}
transport=websocket
RATES=${RATES:-"50 100 200 400 800"}
SINGLE_WRITERS=${SINGLE_WRITERS:-4}
BURSTS=${BURSTS:-"1 2 3"}
BURST_CODECS=${BURST_CODECS:-"msgpack json"}
BURST_PAUSE=${BURST_PAUSE:-10s}
BURST_DIV=${BURST_DIV:-1}
OUT=${OUT:-$(mktemp -d -t ballet-mechanisms.XXXXXX)}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(idle latency saturate)

for t in "${TARGETS[@]}"; do
	case $t in idle | liveheap | latency | saturate | rates | codecs | single | replay | burst) ;; *)
		echo "usage: $0 [idle] [liveheap] [latency] [saturate] [rates] [codecs] [single] [replay] [burst]" >&2
		exit 2
		;;
	esac
done
for cmd in go jq curl createdb dropdb; do
	command -v "$cmd" >/dev/null || {
		echo "$0: $cmd is needed" >&2
		exit 2
	}
done

cd "$(dirname "$0")/.."
mkdir -p "$OUT/bin"
BIN=$OUT/bin
DB=ballet_mechanisms_$$
DBURL=$PGURL/$DB
ADDR=127.0.0.1:$PORT
ADMIN=127.0.0.1:$((PORT + 1))
DEV=127.0.0.1:$((PORT + 10))
DEV_ADMIN=127.0.0.1:$((PORT + 11))
SINK=127.0.0.1:$((PORT + 20))
CLK_TCK=$(getconf CLK_TCK)
DEV_PID= SERVE_PID= SAMPLER_PID= BENCH_PID= SINK_PID= PROF_PID=

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

cleanup() {
	for pid in $PROF_PID $BENCH_PID $SAMPLER_PID $SERVE_PID $DEV_PID $SINK_PID; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	done
	dropdb --if-exists --maintenance-db="$PGURL/postgres" "$DB" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Variants: build tags and environment.
tags_of() {
	case $1 in
	default | gogc100 | trace001 | trace1) echo "" ;;
	nopark | nofd | notimerheap | nodirect | noparallel) echo "$1" ;;
	*)
		echo "$0: unknown variant $1" >&2
		exit 2
		;;
	esac
}
env_of() {
	case $1 in
	gogc100) echo "GOGC=100" ;;
	trace001 | trace1)
		local ratio=1
		[ "$1" = trace001 ] && ratio=0.01
		echo "OTEL_EXPORTER_OTLP_ENDPOINT=http://$SINK OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=$ratio"
		;;
	*) echo "" ;;
	esac
}

# Build each variant once; every tag combination must also vet.
variants=(default)
for t in "${TARGETS[@]}"; do
	case $t in idle | liveheap) pairs=$VARIANTS_IDLE ;; codecs | single | replay | burst) pairs= ;; *) pairs=$VARIANTS_LIVE ;; esac
	for pair in $pairs; do
		variants+=("${pair%%:*}")
	done
done
mapfile -t variants < <(printf '%s\n' "${variants[@]}" | sort -u)
log "building ballet-bench and ballet-gateway (${variants[*]}) into $BIN"
go build -o "$BIN/ballet-bench" ./cmd/ballet-bench
for v in "${variants[@]}"; do
	tags=$(tags_of "$v")
	[ -x "$BIN/ballet-gateway-${tags:-default}" ] && continue
	go vet -tags "$tags" ./gateway/ ./streams/
	go build -tags "$tags" -o "$BIN/ballet-gateway-${tags:-default}" ./cmd/ballet-gateway
done
go vet -tags nopark,notimerheap,nodirect,noparallel ./gateway/ ./streams/
go vet -tags nofd ./gateway/internal/poller/ ./gateway/internal/wsnet/

# The database, the project and the grant.
log "database $DB"
createdb --maintenance-db="$PGURL/postgres" "$DB"
GW=$BIN/ballet-gateway-default
BALLET_DATABASE_URL=$DBURL "$GW" migrate >/dev/null
BALLET_DATABASE_URL=$DBURL "$GW" admin project-create BENCH Bench >/dev/null
BALLET_DATABASE_URL=$DBURL "$GW" admin grant BENCH bench viewer >/dev/null

# The token issuer.
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

# The trace variants' collector: answers every OTLP/HTTP export and keeps nothing.
case " ${variants[*]} " in *" trace"*)
	python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "${SINK#*:}" >"$OUT/sink.log" 2>&1 &
	SINK_PID=$!
	;;
esac

# serve_start VARIANT starts a fresh serve of that variant on $ADDR.
serve_start() {
	local v=$1 tags extra
	tags=$(tags_of "$v")
	extra=$(env_of "$v")
	# shellcheck disable=SC2086 # VAR=value words, or nothing
	env -u GOGC $extra ${SERVE_ENV:-} \
		BALLET_DATABASE_URL="$DBURL" BALLET_ADDR="$ADDR" BALLET_ADMIN_ADDR="$ADMIN" \
		BALLET_OIDC_ISSUER="http://$DEV/dev/oidc" BALLET_OIDC_AUDIENCE=ballet-dev \
		BALLET_MAX_CONNECTIONS_PER_SUBJECT=$((IDLE_N + 1000)) BALLET_MAX_CONNECTIONS_PER_IP=$((IDLE_N + 1000)) \
		BALLET_LOG_LEVEL=WARN BALLET_PPROF=true \
		BALLET_SUBJECT_REQUEST_RATE=1000000 BALLET_REPLAY_RATE=1000000 \
		BALLET_ADDR_RATE=1000000 BALLET_REST_LISTINGS_PER_SUBJECT=1000 BALLET_REST_MAX_LISTINGS=1000 \
		"$BIN/ballet-gateway-${tags:-default}" serve >>"$OUT/serve-$v.log" 2>&1 &
	SERVE_PID=$!
	for _ in $(seq 300); do
		curl -fs "http://$ADMIN/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "$0: serve ($v) did not start (see $OUT/serve-$v.log)" >&2
	exit 1
}

serve_stop() {
	kill "$SERVE_PID" 2>/dev/null || true
	wait "$SERVE_PID" 2>/dev/null || true
	SERVE_PID=
}

# ticks PID prints the CPU time the process has used, in clock ticks.
ticks() {
	local stat
	stat=$(cut -d' ' -f14,15 "/proc/$1/stat")
	echo $((${stat% *} + ${stat#* }))
}

# sample PID FILE writes "unix-ms cpu-ticks open-fds" every second.
sample() {
	while [ -d "/proc/$1" ]; do
		local t fds
		t=$(ticks "$1" 2>/dev/null) || break
		fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
		echo "$(date +%s%3N) $t $fds"
		sleep 1
	done >"$2"
}

# idle_cpu FILE N prints the server's CPU, in % of one core, from 5 s after
# it first held N connections to the last second it still held them.
idle_cpu() {
	awk -v n="$2" -v hz="$CLK_TCK" '
		$3 >= n && !t0 { t0 = $1 }
		$3 >= n && t0 && $1 >= t0 + 5000 { if (!s) { s = $1; c = $2 } e = $1; d = $2 }
		END { if (e > s) printf "%.2f", 100 * (d - c) / hz / ((e - s) / 1000); else print "null" }' "$1"
}

# live_heap prints the server's heap in bytes right after a forced collection.
live_heap() {
	curl -fs "http://$ADMIN/debug/pprof/heap?gc=1" >/dev/null
	curl -fs "http://$ADMIN/metrics" | awk '$1 == "go_memstats_heap_alloc_bytes" { printf "%d", $2 }'
}

BENCH=("$BIN/ballet-bench" --url "ws://$ADDR/rpc" --db "$DBURL" --token-url "$TOKEN_URL" --stream project:BENCH --json)
# shellcheck disable=SC2206 # BENCH_ARGS is split into flags on purpose
BENCH+=(${BENCH_ARGS:-})

# run TARGET VARIANT CODEC ROUND: one run on a fresh serve, its subscribers over $transport, its report
# (with target, variant, round, the server's CPU and the load average
# added) appended to results.jsonl.
run() {
	local target=$1 v=$2 codec=$3 round=$4 rate=${5:-100} name raw t0 t1 idle=null before=null after=null
	name=$target-$v-$codec-$round
	[ "$transport" = websocket ] || name=$target-$v-$codec-$transport-$round
	[ "$target" = rates ] && name=$name-$rate
	[ "$target" = overload ] && rate=1000
	[ "$target" = single ] && rate=400
	raw=$OUT/$name.json
	local bench=("${BENCH[@]}")
	[ "$transport" = websocket ] || bench+=(--transport "$transport")
	serve_start "$v"
	log "$target $v $codec $transport (round $round)"
	t0=$(ticks "$SERVE_PID")
	if [ -n "${PROFILE:-}" ]; then
		(sleep 4 && curl -fs "http://$ADMIN/debug/pprof/profile?seconds=$PROFILE" -o "$OUT/$name.pprof") &
		PROF_PID=$!
	elif [ -n "${HEAPS:-}" ]; then
		(for i in $(seq 1 "$HEAPS"); do
			curl -fs "http://$ADMIN/debug/pprof/heap" -o "$OUT/$name-heap-$i.pprof" || true
			sleep 1
		done) &
		PROF_PID=$!
	fi
	case $target in
	idle)
		sample "$SERVE_PID" "$OUT/$name.cpu" &
		SAMPLER_PID=$!
		"${bench[@]}" --codec "$codec" --mode idle --subscribers "$IDLE_N" --duration "$HOLD" \
			--server-pid "$SERVE_PID" >"$raw" 2>>"$OUT/bench.log" || true
		kill "$SAMPLER_PID" 2>/dev/null || true
		wait "$SAMPLER_PID" 2>/dev/null || true
		SAMPLER_PID=
		idle=$(idle_cpu "$OUT/$name.cpu" "$IDLE_N")
		;;
	liveheap)
		before=$(live_heap)
		"${bench[@]}" --codec "$codec" --mode idle --subscribers "$IDLE_N" --duration 20s \
			--server-pid "$SERVE_PID" >"$raw" 2>"$OUT/$name.log" &
		BENCH_PID=$!
		while kill -0 "$BENCH_PID" 2>/dev/null && ! grep -q holding "$OUT/$name.log"; do
			sleep 0.5
		done
		after=$(live_heap)
		wait "$BENCH_PID" || true
		BENCH_PID=
		cat "$OUT/$name.log" >>"$OUT/bench.log"
		;;
	latency | rates)
		"${bench[@]}" --codec "$codec" --subscribers 1000 --rate "$rate" --duration 10s >"$raw" 2>>"$OUT/bench.log" || true
		;;
	single)
		"${bench[@]}" --codec "$codec" --subscribers 1000 --rate "$rate" --batch 1 --writers "$SINGLE_WRITERS" \
			--duration 10s >"$raw" 2>>"$OUT/bench.log" || true
		;;
	overload)
		"${bench[@]}" --codec "$codec" --subscribers 1000 --rate "$rate" --batch 50 --duration 10s >"$raw" 2>>"$OUT/bench.log" || true
		;;
	replay)
		"${bench[@]}" --codec "$codec" --mode replay >"$raw" 2>>"$OUT/bench.log" || true
		;;
	storm)
		"${bench[@]}" --codec "$codec" --mode replay-storm --subscribers 1000 >"$raw" 2>>"$OUT/bench.log" || true
		;;
	burst1 | burst2 | burst3)
		local args
		case $target in
		burst1) args=(--subscribers $((1000 / BURST_DIV)) --burst-events $((2000 / BURST_DIV)) --event-bytes 2048) ;;
		burst2)
			local paused=$((10 / BURST_DIV > 0 ? 10 / BURST_DIV : 1))
			args=(--subscribers $((paused + 1)) --paused "$paused" --burst-events $((2000 / BURST_DIV)) --event-bytes 81920)
			;;
		burst3)
			args=(--subscribers $((1000 / BURST_DIV)) --paused $((1000 / BURST_DIV)) --pause "$BURST_PAUSE"
				--burst-events $((5000 / BURST_DIV)) --event-bytes 2048)
			;;
		esac
		"${bench[@]}" --codec "$codec" --mode burst "${args[@]}" --server-pid "$SERVE_PID" >"$raw" 2>>"$OUT/bench.log" || true
		;;
	saturate)
		"${bench[@]}" --codec "$codec" --mode saturate --subscribers 1000 --duration 10s >"$raw" 2>>"$OUT/bench.log" || true
		;;
	esac
	t1=$(ticks "$SERVE_PID")
	if [ -n "$PROF_PID" ]; then
		wait "$PROF_PID" || true
		PROF_PID=
	fi
	serve_stop
	if [ ! -s "$raw" ]; then
		log "  no report (see $OUT/bench.log)"
		return
	fi
	jq -c --arg t "$target" --arg v "$v" --argjson r "$round" --argjson idle "$idle" \
		--argjson before "$before" --argjson after "$after" \
		--argjson cpu "$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')" \
		--argjson load "$(cut -d' ' -f1 /proc/loadavg)" --argjson rate "$rate" --arg tr "$transport" \
		'. + {target: $t, variant: $v, round: $r, transport: $tr, rate_per_s: $rate, server_cpu_s: $cpu, server_cpu_idle_pct: $idle,
			live_heap_before_bytes: $before, live_heap_after_bytes: $after, load_1m: $load}' "$raw" |
		tee -a "$OUT/results.jsonl" | jq -r -f <(summary_jq) --arg one 1 >&2
}

# summary_jq is the jq program that describes one run (with $one set) or
# every run of a group (the input an array of runs).
summary_jq() {
	cat <<'EOF'
def r1: . * 10 | round / 10;
def kb: . / 1000 | r1;
def each(f): map(f | tostring) | join(", ");
def per_delivery: .server_cpu_s / .delivered_events * 1e6 | r1;
def describe:
	if .[0].target == "idle" then
		"RSS after connecting " + each(.server_rss_per_conn_bytes | kb) +
		" KB; after the hold " + each((.server_rss_end_bytes - .server_rss_before_bytes) / .connections | kb) +
		" KB; server CPU while held " + each(.server_cpu_idle_pct) + " % of a core"
	elif .[0].target == "liveheap" then
		"live heap " + each((.live_heap_after_bytes - .live_heap_before_bytes) / .connections | kb) + " KB per connection"
	elif .[0].target == "latency" or .[0].target == "rates" or .[0].target == "single" then
		"p99 " + each(.latency_p99_ms | r1) + " ms; p50 " + each(.latency_p50_ms | r1) +
		" ms; server CPU " + each(per_delivery) + " us per delivery; gaps " + each(.gaps) +
		(if any(.[]; (.written_events_per_s // .rate_per_s) < 0.95 * .rate_per_s)
		then "; the writer fell short: " + each(.written_events_per_s | round) + " events/s" else "" end)
	elif .[0].target == "replay" then
		"replay p99 " + each(.replay_p99_ms | r1) + " ms; p50 " + each(.replay_p50_ms | r1) + " ms; first " +
		each(.replay_first_ms | r1) + " ms; gaps " + each(.gaps)
	elif .[0].target == "storm" then
		"all caught up in " + each(.all_caught_up_s | r1) + " s; gaps " + each(.gaps) + "; duplicates " + each(.duplicates)
	elif .[0].target | startswith("burst") then
		(if any(.[]; .deliveries_per_s) then each((.deliveries_per_s // 0) / 1000 | r1) + "k deliveries/s"
		else "caught up " + each(.paused_caught_up_s // 0 | r1) + " s after reading again" end) +
		"; server CPU " + each(.server_cpu_us_per_delivery | r1) +
		" us per delivery; peak RSS +" + each(.server_rss_peak_growth_bytes / 1e6 | r1) + " MB; every event once " +
		each("\((.fast_complete // 0) + (.paused_complete // 0))/\(.subscribers)") + "; lagging closes " +
		each((.fast_stream_closed.lagging // 0) + (.paused_stream_closed.lagging // 0)) + "; disconnects " +
		each([.fast_disconnects, .paused_disconnects] | map((. // {}) | [.[]] | add // 0) | add)
	elif .[0].target == "overload" then
		each(.deliveries_per_s / 1000 | round) + "k deliveries/s; p99 " + each(.latency_p99_ms | r1) +
		" ms; server CPU " + each(per_delivery) + " us per delivery; gaps " + each(.gaps)
	else
		each(.deliveries_per_s / 1000 | round) + "k deliveries/s; server CPU " + each(per_delivery) +
		" us per delivery; gaps " + each(.gaps)
	end
	+ "; load " + each(.load_1m)
	+ (map(select(.ok | not) | .failures | join("; ")) | if length > 0 then " FAILED: " + join(" / ") else "" end);
if $one == "1" then "  " + ([.] | describe)
else group_by([.target, .variant, .codec, .transport, .rate_per_s])[]
	| "\(.[0].target)\t\(.[0].variant)\t\(.[0].codec)\t\(.[0].transport)\t\(.[0].rate_per_s)/s\t" + describe end
EOF
}

for round in $(seq "$RUNS"); do
	for target in "${TARGETS[@]}"; do
		case $target in idle | liveheap) pairs=$VARIANTS_IDLE ;; *) pairs=$VARIANTS_LIVE ;; esac
		if [ "$target" = codecs ]; then
			for codec in msgpack json; do
				run overload default "$codec" "$round"
				run saturate default "$codec" "$round"
				run single default "$codec" "$round"
			done
			continue
		fi
		if [ "$target" = replay ]; then
			for codec in msgpack json; do
				run replay default "$codec" "$round"
				run storm default "$codec" "$round"
			done
			continue
		fi
		if [ "$target" = burst ]; then
			for b in $BURSTS; do
				for codec in $BURST_CODECS; do
					run "burst$b" default "$codec" "$round"
				done
			done
			continue
		fi
		if [ "$target" = single ]; then
			for codec in msgpack json; do
				run single default "$codec" "$round"
			done
			continue
		fi
		if [ "$target" = rates ]; then
			for rate in $RATES; do
				for codec in msgpack json; do
					run rates default "$codec" "$round" "$rate"
				done
			done
			continue
		fi
		for pair in $pairs; do
			for transport in $TRANSPORTS; do
				# HTTP subscribers speak JSON only.
				[ "$transport" = http ] && [ "${pair#*:}" != json ] && continue
				run "$target" "${pair%%:*}" "${pair#*:}" "$round"
			done
			transport=websocket
		done
	done
done

# Every run's figures, by target, variant and codec, in the order run.
echo
jq -rs -f <(summary_jq) --arg one 0 "$OUT/results.jsonl" | column -t -s "$(printf '\t')"
# JSON against MessagePack, the default build's medians (the targets: deliveries at least 0.8,
# CPU per delivery at most 1.25, p99 at most 2 times MessagePack's).
jq -rs '
	def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def r2: . * 100 | round / 100;
	map(select(.variant == "default" and .transport != "http" and (.target == "overload" or .target == "saturate" or .target == "single")))
	| group_by(.target)[]
	| (map(select(.codec == "json"))) as $j | (map(select(.codec == "msgpack"))) as $m
	| select(($j | length) > 0 and ($m | length) > 0)
	| def cpu: map(.server_cpu_s / .delivered_events) | median;
	"\(.[0].target): JSON / MessagePack: deliveries " + (($j | map(.deliveries_per_s) | median) / ($m | map(.deliveries_per_s) | median) | r2 | tostring)
		+ "x; CPU per delivery " + (($j | cpu) / ($m | cpu) | r2 | tostring)
		+ "x; p99 " + (($j | map(.latency_p99_ms) | median) / ($m | map(.latency_p99_ms) | median) | r2 | tostring) + "x"' "$OUT/results.jsonl"
# HTTP subscribers against WebSocket ones, the medians of each (the target: idle memory and CPU
# per delivery at most 2 times a WebSocket subscriber's).
jq -rs '
	def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def r2: . * 100 | round / 100;
	def ratio(f): ((map(select(.transport == "http")) | map(f) | median) / (map(select(.transport == "websocket")) | map(f) | median)) | r2 | tostring;
	map(select(.codec == "json" and (.target == "idle" or .target == "latency" or .target == "saturate")))
	| group_by([.target, .variant])[]
	| select(any(.[]; .transport == "http") and any(.[]; .transport == "websocket"))
	| "\(.[0].target) \(.[0].variant): HTTP / WebSocket: " +
		if .[0].target == "idle" then
			"RSS per connection after connecting " + ratio(.server_rss_per_conn_bytes) + "x, after the hold " +
			ratio((.server_rss_end_bytes - .server_rss_before_bytes) / .connections) + "x"
		else
			"CPU per delivery " + ratio(.server_cpu_s / .delivered_events) + "x; p99 " + ratio(.latency_p99_ms // 0) +
			"x; deliveries " + ratio(.deliveries_per_s) + "x"
		end' "$OUT/results.jsonl"
echo
echo "raw reports: $OUT/results.jsonl"
