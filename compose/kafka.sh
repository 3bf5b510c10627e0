#!/usr/bin/env bash
# compose/kafka.sh - a real single-node Apache Kafka broker (KRaft, combined
# broker+controller) without Docker, run from the official jars on Maven Central;
# or a local cluster of such nodes (cluster-up, below).
#
#   compose/kafka.sh up          fetch jars (once), format storage (once), start, wait until ready
#   compose/kafka.sh down        stop (SIGTERM, then SIGKILL after KAFKA_STOP_TIMEOUT s)
#   compose/kafka.sh status      exit 0 when running, 1 when not
#   compose/kafka.sh wipe        down, then delete data and logs (jars stay)
#   compose/kafka.sh logs [N|-f] path of the broker log and its last N (40) lines, or follow it
#   compose/kafka.sh classpath   classpath for Kafka's tools:
#                                  java -cp "$(compose/kafka.sh classpath)" org.apache.kafka.tools.TopicCommand ...
#   compose/kafka.sh bootstrap   prints the bootstrap address, e.g. KAFKA_BROKERS=$(compose/kafka.sh bootstrap)
#   compose/kafka.sh perf ARGS   org.apache.kafka.tools.ProducerPerformance ARGS against this broker
#   compose/kafka.sh topics ARGS org.apache.kafka.tools.TopicCommand ARGS against this broker
#                                (perf, topics: or against the --bootstrap-server given, e.g. a cluster)
#   compose/kafka.sh tool CLASS ARGS   any main class with the Kafka classpath (no address added)
#
# Settings (environment, with defaults):
#   KAFKA_PORT=9092  KAFKA_CONTROLLER_PORT=9093  HOOKLINE_KAFKA_DIR=<repo>/.kafka
#   KAFKA_HEAP_OPTS="-Xms512m -Xmx512m"  KAFKA_JVM_PERFORMANCE_OPTS  KAFKA_OPTS
#   KAFKA_START_TIMEOUT=90  KAFKA_STOP_TIMEOUT=30  KAFKA_READY_CHECK=auto|kcat|java
#   KAFKA_JARS_DIR=$HOOKLINE_KAFKA_DIR/jars (instances may share one)
#   KAFKA_PERF_HEAP_OPTS="-Xms256m -Xmx512m" (perf, topics, tool)
# For a second instance (the cluster commands below set these per node):
#   KAFKA_NODE_ID=1  KAFKA_QUORUM_VOTERS=<id>@127.0.0.1:<controller port>
#   KAFKA_CLUSTER_ID (used when formatting; must match an existing data dir)
#   KAFKA_REPLICATION_FACTOR=1  KAFKA_MIN_ISR=1
#   KAFKA_OFFSETS_PARTITIONS=4  KAFKA_TXN_PARTITIONS=4
#   KAFKA_EXTRA_CONFIG=<file>   properties appended to the generated server.properties
#   compose/kafka.sh kill        SIGKILL the broker (a crash, for tests)
#
# A local cluster: N combined broker+controller nodes on loopback, all voters
# of one KRaft quorum, one cluster id, node N in <cluster dir>/node-N:
#   compose/kafka.sh cluster-up         start every node in parallel; ready when one metadata
#                                       request lists all N brokers
#   compose/kafka.sh cluster-down       stop every node (SIGTERM, in parallel)
#   compose/kafka.sh cluster-status     one line per node; exit 0 when all N run and are registered
#   compose/kafka.sh cluster-wipe       cluster-down, then delete the nodes' data and logs
#   compose/kafka.sh cluster-bootstrap  prints the addresses, e.g. 127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
#   compose/kafka.sh node N up|down|kill|status|logs [ARGS]   one node (a lone node cannot get
#                                       ready: the quorum needs a majority of the nodes running)
# Cluster settings (environment, with defaults):
#   KAFKA_CLUSTER_PORTS=19092,19093,19094  KAFKA_CLUSTER_CONTROLLER_PORTS=19192,19193,19194
#                                (one of each per node; their count is the cluster's size)
#   KAFKA_CLUSTER_DIR=<repo>/.kafka-cluster (node-N/, cluster.id)
#   KAFKA_CLUSTER_HEAP_OPTS="-Xms384m -Xmx384m" (per node)
#   KAFKA_CLUSTER_REPLICATION_FACTOR=3 (fewer nodes: their number)
#   KAFKA_CLUSTER_MIN_ISR=2 (1 when the replication factor is below 3); both also
#                                for the internal topics
#   KAFKA_JARS_DIR as above (default <repo>/.kafka/jars, shared with the single broker)
#   KAFKA_CLUSTER_ID, KAFKA_START_TIMEOUT, KAFKA_STOP_TIMEOUT, KAFKA_READY_CHECK as above
#
# A secure broker beside the plaintext one (SASL_SSL, SCRAM-SHA-512, ACLs; docs/security.md, "Secure Kafka"):
#   compose/kafka.sh secure-up      CA and certificate (openssl), users, start, the services' ACLs for
#                                   HOOKLINE_TOPIC_PREFIX, and <dir>/<user>.env for admin, ingest,
#                                   processor, retrier, dlq: set -a; . .kafka-secure/ingest.env
#   compose/kafka.sh secure-down | secure-status | secure-wipe (new CA, users and data)
#   compose/kafka.sh secure-acls PREFIX   the services' ACLs for another HOOKLINE_TOPIC_PREFIX
#   compose/kafka.sh secure-bootstrap     prints 127.0.0.1:<KAFKA_SECURE_PORT>
# Secure settings: KAFKA_SECURE_PORT=KAFKA_PORT+3  KAFKA_SECURE_CONTROLLER_PORT=KAFKA_PORT+4
#   (9095 and 9096 beside the default 9092: a checkout that moves its plaintext
#   broker moves its secure one too)
#   KAFKA_SECURE_DIR=<repo>/.kafka-secure  KAFKA_SECURE_HEAP_OPTS="-Xms384m -Xmx384m"
#   KAFKA_JARS_DIR as above (default <repo>/.kafka/jars, shared with the single broker)
# (for any instance: KAFKA_SCRAM_FILE=<file> lines of StorageTool --add-scram, used when
# formatting; KAFKA_CLIENT_CONFIG=<file> client properties for the java ready check)
#
# The instance directory holds jars/, data/ (log.dirs and KRaft metadata),
# logs/ (server.log, server.out, gc.log), server.properties, log4j2.properties, kafka.pid.
set -euo pipefail

readonly KAFKA_HOST=127.0.0.1

COMPOSE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(dirname "$COMPOSE_DIR")"
SRC_DIR="$COMPOSE_DIR/kafka"

KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_NODE_ID="${KAFKA_NODE_ID:-1}"
KAFKA_QUORUM_VOTERS="${KAFKA_QUORUM_VOTERS:-$KAFKA_NODE_ID@$KAFKA_HOST:$KAFKA_CONTROLLER_PORT}"
KAFKA_REPLICATION_FACTOR="${KAFKA_REPLICATION_FACTOR:-1}"
KAFKA_MIN_ISR="${KAFKA_MIN_ISR:-1}"
KAFKA_OFFSETS_PARTITIONS="${KAFKA_OFFSETS_PARTITIONS:-4}"
KAFKA_TXN_PARTITIONS="${KAFKA_TXN_PARTITIONS:-4}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
KAFKA_READY_CHECK="${KAFKA_READY_CHECK:-auto}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms512m -Xmx512m}"
KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
KAFKA_OPTS="${KAFKA_OPTS:-}"
KAFKA_PERF_HEAP_OPTS="${KAFKA_PERF_HEAP_OPTS:--Xms256m -Xmx512m}"
KAFKA_CLUSTER_PORTS="${KAFKA_CLUSTER_PORTS:-19092,19093,19094}"
KAFKA_CLUSTER_CONTROLLER_PORTS="${KAFKA_CLUSTER_CONTROLLER_PORTS:-19192,19193,19194}"
KAFKA_CLUSTER_HEAP_OPTS="${KAFKA_CLUSTER_HEAP_OPTS:--Xms384m -Xmx384m}"

KAFKA_DIR="${HOOKLINE_KAFKA_DIR:-$REPO_ROOT/.kafka}"
[[ "$KAFKA_DIR" == /* ]] || KAFKA_DIR="$PWD/$KAFKA_DIR"
JARS_DIR="${KAFKA_JARS_DIR:-$KAFKA_DIR/jars}"
[[ "$JARS_DIR" == /* ]] || JARS_DIR="$PWD/$JARS_DIR"
CLUSTER_DIR="${KAFKA_CLUSTER_DIR:-$REPO_ROOT/.kafka-cluster}"
[[ "$CLUSTER_DIR" == /* ]] || CLUSTER_DIR="$PWD/$CLUSTER_DIR"
DATA_DIR="$KAFKA_DIR/data"
LOG_DIR="$KAFKA_DIR/logs"
PID_FILE="$KAFKA_DIR/kafka.pid"
CONFIG="$KAFKA_DIR/server.properties"
LOG4J_CONFIG="$KAFKA_DIR/log4j2.properties"
SERVER_LOG="$LOG_DIR/server.log"
SERVER_OUT="$LOG_DIR/server.out"

JAVA="${JAVA:-${JAVA_HOME:+$JAVA_HOME/bin/}java}"
MVN="${MVN:-mvn}"
BOOTSTRAP="$KAFKA_HOST:$KAFKA_PORT"

say() { printf 'kafka.sh: %s\n' "$*"; }
err() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { err "$@"; exit 1; }

now_ms() {
	local t
	t="$(date +%s%3N)"
	[[ "$t" =~ ^[0-9]+$ ]] || t="$(($(date +%s) * 1000))"
	printf '%s\n' "$t"
}
elapsed() { local ms=$(( $(now_ms) - $1 )); printf '%d.%01ds' $((ms / 1000)) $((ms % 1000 / 100)); }

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
	else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# lock FD FILE: serialise this script's mutating commands (no-op without
# flock). Fixed fds (8: instance, 9: jars) so that the broker and tools are
# started with them closed: an inherited fd would hold the lock for the JVM's
# life. A lock is held until the script exits; taking it twice is a no-op.
LOCKS_HELD=" "
lock() {
	command -v flock >/dev/null 2>&1 || return 0
	[[ "$LOCKS_HELD" != *" $1 "* ]] || return 0
	case "$1" in
	8) exec 8>"$2" ;;
	9) exec 9>"$2" ;;
	*) die "lock: bad fd $1" ;;
	esac
	flock -w 600 "$1" || die "could not lock $2 within 600 s"
	LOCKS_HELD+="$1 "
}

check_settings() {
	local name
	for name in KAFKA_PORT KAFKA_CONTROLLER_PORT KAFKA_NODE_ID KAFKA_START_TIMEOUT KAFKA_STOP_TIMEOUT \
		KAFKA_REPLICATION_FACTOR KAFKA_MIN_ISR KAFKA_OFFSETS_PARTITIONS KAFKA_TXN_PARTITIONS; do
		[[ "${!name}" =~ ^[0-9]+$ ]] || die "$name must be a number, got '${!name}'"
	done
	[[ "$KAFKA_PORT" != "$KAFKA_CONTROLLER_PORT" ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ"
	case "$KAFKA_READY_CHECK" in auto | kcat | java) ;; *) die "KAFKA_READY_CHECK must be auto, kcat or java" ;; esac
	command -v "$JAVA" >/dev/null 2>&1 || die "java not found (set JAVA_HOME or JAVA); Kafka 4.x needs Java 17+"
}

# ---------------------------------------------------------------- jars

jars_complete() {
	local stamp="$JARS_DIR/.complete" want f
	[[ -f "$stamp" ]] || return 1
	want="$(sha256 "$SRC_DIR/pom.xml")"
	{
		IFS= read -r f || return 1
		[[ "$f" == "pom-sha256 $want" ]] || return 1
		while IFS= read -r f; do [[ -f "$JARS_DIR/$f" ]] || return 1; done
	} <"$stamp"
}

# ensure_jars: copy the jars listed by compose/kafka/pom.xml into $JARS_DIR,
# unless it already holds them for this exact pom. Progress goes to stderr.
ensure_jars() {
	jars_complete && return 0
	mkdir -p "$(dirname "$JARS_DIR")"
	lock 9 "$JARS_DIR.lock"
	jars_complete && return 0
	command -v "$MVN" >/dev/null 2>&1 || die "mvn not found: Maven is needed once to fetch the Kafka jars"
	local tmp="$JARS_DIR.tmp.$$" mvnlog="$JARS_DIR.mvn.log" t0
	t0="$(now_ms)"
	err "fetching Kafka jars with Maven into $JARS_DIR (once per pom change; Maven caches in ~/.m2)"
	rm -rf "$tmp"
	if ! "$MVN" -B -ntp -f "$SRC_DIR/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$mvnlog" 2>&1; then
		rm -rf "$tmp"
		tail -n 40 "$mvnlog" >&2
		die "Maven failed to fetch the Kafka jars (full output: $mvnlog)"
	fi
	{
		echo "pom-sha256 $(sha256 "$SRC_DIR/pom.xml")"
		(cd "$tmp" && ls -1 -- *.jar)
	} >"$tmp/.complete"
	rm -rf "$JARS_DIR"
	mv "$tmp" "$JARS_DIR"
	rm -f "$mvnlog"
	err "jars ready: $(($(wc -l <"$JARS_DIR/.complete") - 1)) jars in $(elapsed "$t0")"
}

tools_classpath() { printf '%s\n' "$SRC_DIR/tools-conf:$JARS_DIR/*"; }

# ---------------------------------------------------------------- process

# is_alive PID: the process exists and is not a zombie.
is_alive() {
	kill -0 "$1" 2>/dev/null || return 1
	if [[ -r "/proc/$1/stat" ]]; then
		local stat
		stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
		stat="${stat##*) }"
		[[ "${stat:0:1}" != Z ]] || return 1
	fi
	return 0
}

cmdline_of() {
	if [[ -r "/proc/$1/cmdline" ]]; then tr '\0' ' ' <"/proc/$1/cmdline"
	else ps -p "$1" -o command= 2>/dev/null; fi
}

# running_pid: prints the broker's pid when the pid file names a live broker
# of this instance (guards against pid reuse); fails otherwise.
running_pid() {
	local pid
	[[ -f "$PID_FILE" ]] || return 1
	pid="$(<"$PID_FILE")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	is_alive "$pid" || return 1
	[[ "$(cmdline_of "$pid")" == *"kafka.Kafka $CONFIG"* ]] || return 1
	printf '%s\n' "$pid"
}

port_in_use() { (exec 3<>"/dev/tcp/$KAFKA_HOST/$1") 2>/dev/null; }

# port_owner PORT: who listens on PORT, as far as ss can tell: a Kafka
# broker with its config file (which names its checkout), or a pid and its
# command; "another process" without ss or when it cannot see the pid.
port_owner() {
	local line pid cmd
	command -v ss >/dev/null 2>&1 || { echo "another process"; return 0; }
	line="$(ss -Hltnp "sport = :$1" 2>/dev/null | head -n 1)"
	pid="$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' <<<"$line")"
	[[ -n "$pid" ]] || { echo "another process"; return 0; }
	cmd="$(cmdline_of "$pid")"
	if [[ "$cmd" == *kafka.Kafka\ * ]]; then
		cmd="${cmd##*kafka.Kafka }"
		echo "a Kafka broker (pid $pid, config ${cmd%% *})"
	else
		echo "pid $pid (${cmd:0:80})"
	fi
}

render_config() {
	local tmpl
	tmpl="$(<"$SRC_DIR/server.properties.tmpl")"
	# Quoted replacements: taken literally (no & expansion in bash 5.2).
	tmpl="${tmpl//@NODE_ID@/"$KAFKA_NODE_ID"}"
	tmpl="${tmpl//@QUORUM_VOTERS@/"$KAFKA_QUORUM_VOTERS"}"
	tmpl="${tmpl//@PORT@/"$KAFKA_PORT"}"
	tmpl="${tmpl//@CONTROLLER_PORT@/"$KAFKA_CONTROLLER_PORT"}"
	tmpl="${tmpl//@DATA_DIR@/"$DATA_DIR"}"
	tmpl="${tmpl//@REPLICATION_FACTOR@/"$KAFKA_REPLICATION_FACTOR"}"
	tmpl="${tmpl//@MIN_ISR@/"$KAFKA_MIN_ISR"}"
	tmpl="${tmpl//@OFFSETS_PARTITIONS@/"$KAFKA_OFFSETS_PARTITIONS"}"
	tmpl="${tmpl//@TXN_PARTITIONS@/"$KAFKA_TXN_PARTITIONS"}"
	! grep -v '^#' <<<"$tmpl" | grep -qE '@[A-Z_]+@' || die "unfilled placeholder in $SRC_DIR/server.properties.tmpl"
	{
		printf '# Generated by compose/kafka.sh from compose/kafka/server.properties.tmpl; edits are overwritten on up.\n'
		printf '%s\n' "$tmpl"
		if [[ -n "${KAFKA_EXTRA_CONFIG:-}" ]]; then
			[[ -f "$KAFKA_EXTRA_CONFIG" ]] || die "KAFKA_EXTRA_CONFIG=$KAFKA_EXTRA_CONFIG is not a file"
			printf '\n# --- from KAFKA_EXTRA_CONFIG=%s (later keys win)\n' "$KAFKA_EXTRA_CONFIG"
			cat "$KAFKA_EXTRA_CONFIG"
		fi
	} >"$CONFIG.tmp"
	mv "$CONFIG.tmp" "$CONFIG"
	cp "$SRC_DIR/log4j2.properties" "$LOG4J_CONFIG"
}

# new_cluster_id: what `kafka-storage random-uuid` prints (16 random bytes,
# URL-safe base64 without padding, never starting with '-'), minus a 1.5 s JVM start.
new_cluster_id() {
	local id
	while :; do
		id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
		[[ "$id" == -* ]] || break
	done
	printf '%s\n' "$id"
}

prop_of() { sed -n "s/^$1=//p" "$2" | tail -n 1; }

# ensure_formatted: format the storage once; later runs keep the cluster id
# stored in data/meta.properties. (Formatting an already formatted dir with a
# new id fails: "Invalid cluster.id in .../meta.properties"; nodes of one
# cluster must share the id, hence KAFKA_CLUSTER_ID.)
ensure_formatted() {
	local meta="$DATA_DIR/meta.properties" id out
	if [[ -f "$meta" ]]; then
		id="$(prop_of cluster.id "$meta")"
		[[ -z "${KAFKA_CLUSTER_ID:-}" || "$KAFKA_CLUSTER_ID" == "$id" ]] ||
			die "$DATA_DIR belongs to cluster $id, not KAFKA_CLUSTER_ID=$KAFKA_CLUSTER_ID (unset it, or: compose/kafka.sh wipe)"
		[[ "$(prop_of node.id "$meta")" == "$KAFKA_NODE_ID" ]] ||
			die "$DATA_DIR was formatted for node.id $(prop_of node.id "$meta"), not $KAFKA_NODE_ID (or: compose/kafka.sh wipe)"
		return 0
	fi
	id="${KAFKA_CLUSTER_ID:-$(new_cluster_id)}"
	mkdir -p "$DATA_DIR"
	# SCRAM users exist from the first start (KRaft keeps them in its
	# metadata log); the broker needs its own to talk to itself over SASL.
	local scram=() line
	if [[ -n "${KAFKA_SCRAM_FILE:-}" ]]; then
		while IFS= read -r line; do [[ -z "$line" ]] || scram+=(--add-scram "$line"); done <"$KAFKA_SCRAM_FILE"
	fi
	if ! out="$("$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$SRC_DIR/tools-conf/log4j2.properties" \
		-cp "$JARS_DIR/*" kafka.tools.StorageTool format -t "$id" -c "$CONFIG" --ignore-formatted "${scram[@]}" 2>&1)"; then
		printf '%s\n' "$out" >&2
		die "formatting $DATA_DIR failed"
	fi
	say "formatted $DATA_DIR (cluster id $id)"
}

# metadata_brokers BOOTSTRAP: one metadata request to BOOTSTRAP (host:port,
# comma-separated); prints "<id> <host:port>" for every broker it lists, that
# is every broker registered and unfenced. Fails when nobody answers.
metadata_brokers() {
	local mode="$KAFKA_READY_CHECK" out
	if [[ "$mode" == auto ]]; then
		if command -v kcat >/dev/null 2>&1; then mode=kcat; else mode=java; fi
	fi
	if [[ "$mode" == kcat ]]; then
		out="$(kcat -b "$1" -L -J -m 3 2>/dev/null)" || return 1
		grep -o '"brokers":\[[^]]*\]' <<<"$out" | grep -o '"id":[0-9]*,"name":"[^"]*"' |
			sed 's/^"id":\([0-9]*\),"name":"\([^"]*\)"$/\1 \2/'
	else
		# BrokerApiVersionsCommand bootstraps with a Metadata request, then asks
		# every listed broker for its API versions: a broker it prints is
		# registered, unfenced and serving requests.
		local limit=()
		if command -v timeout >/dev/null 2>&1; then limit=(timeout 20); fi
		local conf=()
		[[ -z "${KAFKA_CLIENT_CONFIG:-}" ]] || conf=(--command-config "$KAFKA_CLIENT_CONFIG")
		out="$("${limit[@]}" "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -cp "$(tools_classpath)" \
			org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" "${conf[@]}" 2>/dev/null)" || return 1
		sed -n 's/^\([^ ]*\) (id: \([0-9]*\) .*/\2 \1/p' <<<"$out"
	fi
}

# ready: one metadata request that lists this broker.
ready() {
	local listed
	port_in_use "$KAFKA_PORT" || return 1
	listed="$(metadata_brokers "$BOOTSTRAP")" || return 1
	grep -qx "$KAFKA_NODE_ID $BOOTSTRAP" <<<"$listed"
}

file_size() { if [[ -f "$1" ]]; then wc -c <"$1" | tr -d ' '; else echo 0; fi; }

# show_log_tail LOG_OFFSET OUT_OFFSET: the broker log's last 40 lines written
# since the given offsets (this start), for a failed `up`.
show_log_tail() {
	local log_off="$1" out_off="$2" lines out
	out="$(tail -c +"$((out_off + 1))" "$SERVER_OUT" 2>/dev/null | grep -v '^=====' | grep -v '^$' | tail -n 20 || true)"
	err "broker log: $SERVER_LOG"
	if [[ ! -f "$SERVER_LOG" ]]; then
		err "(no broker log)"
	else
		# A log that shrank has rolled over: show its tail.
		(($(file_size "$SERVER_LOG") >= log_off)) || log_off=0
		lines="$(tail -c +"$((log_off + 1))" "$SERVER_LOG" | tail -n 40)"
		if [[ -n "$lines" ]]; then
			err "last 40 lines of this start:"
			printf '%s\n' "$lines" >&2
		elif [[ -n "$out" ]]; then
			err "(nothing logged by this start)"
		else
			err "(nothing logged by this start; the last 40 lines, from an earlier run:)"
			tail -n 40 "$SERVER_LOG" >&2
		fi
	fi
	if [[ -n "$out" ]]; then
		err "JVM stdout/stderr: $SERVER_OUT (last 20 lines of this start):"
		printf '%s\n' "$out" >&2
	fi
}

# stop_pid PID: SIGTERM, wait up to KAFKA_STOP_TIMEOUT s, then SIGKILL.
stop_pid() {
	local pid="$1" deadline
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
	while is_alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
	if is_alive "$pid"; then
		err "broker (pid $pid) did not exit within ${KAFKA_STOP_TIMEOUT} s of SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		while is_alive "$pid"; do sleep 0.1; done
	fi
}

# ---------------------------------------------------------------- commands

cmd_up() {
	local pid t0 port launcher=() heap=() jvm=() opts=()
	t0="$(now_ms)"
	mkdir -p "$KAFKA_DIR"
	lock 8 "$KAFKA_DIR/.lock"
	if pid="$(running_pid)"; then
		say "already running (pid $pid) on $BOOTSTRAP; nothing to do"
		return 0
	fi
	if [[ -f "$PID_FILE" ]]; then
		say "removing stale pid file $PID_FILE (pid $(<"$PID_FILE") is not running)"
		rm -f "$PID_FILE"
	fi
	for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
		! port_in_use "$port" ||
			die "port $KAFKA_HOST:$port is already in use by $(port_owner "$port"): set ${KAFKA_PORT_NAMES:-KAFKA_PORT / KAFKA_CONTROLLER_PORT} to free ports"
	done
	ensure_jars
	mkdir -p "$LOG_DIR"
	render_config
	ensure_formatted

	read -r -a heap <<<"$KAFKA_HEAP_OPTS"
	read -r -a jvm <<<"$KAFKA_JVM_PERFORMANCE_OPTS"
	read -r -a opts <<<"$KAFKA_OPTS"
	if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi
	launcher+=(nohup)
	local log_off out_off
	log_off="$(file_size "$SERVER_LOG")"
	out_off="$(file_size "$SERVER_OUT")"
	printf '===== %s compose/kafka.sh up: starting broker\n' "$(date -u +%FT%TZ)" >>"$SERVER_OUT"
	rm -f "$PID_FILE.new"
	# The inner shell writes its own pid, then execs java: that pid is the JVM's
	# whether or not setsid had to fork. setsid: the broker is not in the
	# caller's process group, so it outlives the job that ran `up`.
	# shellcheck disable=SC2016 # $$ and $0 are for the inner shell
	"${launcher[@]}" bash -c 'echo $$ >"$0" && exec "$@"' "$PID_FILE.new" \
		"$JAVA" "${heap[@]}" "${jvm[@]}" \
		"-Xlog:gc*:file=$LOG_DIR/gc.log:time,tags:filecount=2,filesize=20M" \
		"-Dkafka.logs.dir=$LOG_DIR" "-Dlog4j2.configurationFile=$LOG4J_CONFIG" \
		"${opts[@]}" -cp "$JARS_DIR/*" kafka.Kafka "$CONFIG" \
		>>"$SERVER_OUT" 2>&1 </dev/null 8>&- 9>&- &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "$PID_FILE.new" ]] && break
		sleep 0.05
	done
	[[ -s "$PID_FILE.new" ]] || die "broker process did not start (see $SERVER_OUT)"
	mv "$PID_FILE.new" "$PID_FILE"
	pid="$(<"$PID_FILE")"

	local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
	while :; do
		if ! is_alive "$pid"; then
			rm -f "$PID_FILE"
			show_log_tail "$log_off" "$out_off"
			die "broker (pid $pid) exited during start-up"
		fi
		if ready; then break; fi
		if ((SECONDS >= deadline)); then
			err "broker (pid $pid) not ready on $BOOTSTRAP after ${KAFKA_START_TIMEOUT} s; stopping it"
			stop_pid "$pid"
			rm -f "$PID_FILE"
			show_log_tail "$log_off" "$out_off"
			exit 1
		fi
		sleep 0.25
	done
	say "Kafka ready on $BOOTSTRAP (pid $pid, node $KAFKA_NODE_ID, $(elapsed "$t0")); dir $KAFKA_DIR; log $SERVER_LOG"
}

cmd_down() {
	local pid
	mkdir -p "$KAFKA_DIR"
	lock 8 "$KAFKA_DIR/.lock"
	if ! pid="$(running_pid)"; then
		rm -f "$PID_FILE"
		say "not running ($BOOTSTRAP, dir $KAFKA_DIR); nothing to do"
		return 0
	fi
	local t0
	t0="$(now_ms)"
	stop_pid "$pid"
	rm -f "$PID_FILE"
	say "stopped (pid $pid) in $(elapsed "$t0")"
}

cmd_kill() {
	local pid
	mkdir -p "$KAFKA_DIR"
	lock 8 "$KAFKA_DIR/.lock"
	if ! pid="$(running_pid)"; then
		rm -f "$PID_FILE"
		say "not running ($BOOTSTRAP, dir $KAFKA_DIR); nothing to kill"
		return 0
	fi
	kill -KILL "$pid" 2>/dev/null || true
	while is_alive "$pid"; do sleep 0.05; done
	rm -f "$PID_FILE"
	say "killed (SIGKILL, pid $pid) on $BOOTSTRAP"
}

cmd_status() {
	local pid
	if pid="$(running_pid)"; then
		say "running (pid $pid) on $BOOTSTRAP, controller $KAFKA_HOST:$KAFKA_CONTROLLER_PORT, dir $KAFKA_DIR"
		return 0
	fi
	say "not running ($BOOTSTRAP, dir $KAFKA_DIR)"
	return 1
}

cmd_wipe() {
	cmd_down
	lock 8 "$KAFKA_DIR/.lock"
	rm -rf "$DATA_DIR" "$LOG_DIR" "$CONFIG" "$LOG4J_CONFIG" "$PID_FILE"
	say "wiped data and logs in $KAFKA_DIR (jars kept in $JARS_DIR)"
}

cmd_logs() {
	printf '%s\n' "$SERVER_LOG"
	[[ -f "$SERVER_LOG" ]] || die "no broker log yet ($SERVER_LOG)"
	case "${1:-40}" in
	-f) exec tail -n 40 -F "$SERVER_LOG" ;;
	*[!0-9]*) die "usage: compose/kafka.sh logs [N|-f]" ;;
	*) tail -n "${1:-40}" "$SERVER_LOG" ;;
	esac
}

# run_tool CLASS ARGS...: a Kafka main class with the tools classpath.
run_tool() {
	local heap=()
	ensure_jars >&2
	read -r -a heap <<<"$KAFKA_PERF_HEAP_OPTS"
	exec "$JAVA" "${heap[@]}" -cp "$(tools_classpath)" "$@" 8>&- 9>&-
}

has_bootstrap_arg() {
	local a
	for a in "$@"; do [[ "$a" == --bootstrap-server* ]] && return 0; done
	return 1
}

require_running() {
	running_pid >/dev/null || die "broker not running on $BOOTSTRAP (dir $KAFKA_DIR): run compose/kafka.sh up"
}

# ---------------------------------------------------------------- cluster
#
# A cluster is N single-node instances of this script (one dir, broker port
# and controller port each, node.id 1..N), every node a broker and a voter of
# one static KRaft quorum, formatted with one shared cluster id. The cluster
# commands run this script once per node with that node's settings.

SELF="$COMPOSE_DIR/$(basename "${BASH_SOURCE[0]}")"
CLUSTER_PORTS=()
CLUSTER_CONTROLLER_PORTS=()
CLUSTER_RF=
CLUSTER_MIN_ISR=
CLUSTER_VOTERS=
CLUSTER_ID=

check_cluster_settings() {
	local p n all=" " i
	IFS=, read -r -a CLUSTER_PORTS <<<"$KAFKA_CLUSTER_PORTS"
	IFS=, read -r -a CLUSTER_CONTROLLER_PORTS <<<"$KAFKA_CLUSTER_CONTROLLER_PORTS"
	n=${#CLUSTER_PORTS[@]}
	((n >= 1)) || die "KAFKA_CLUSTER_PORTS is empty"
	[[ ${#CLUSTER_CONTROLLER_PORTS[@]} -eq $n ]] ||
		die "KAFKA_CLUSTER_PORTS lists $n ports but KAFKA_CLUSTER_CONTROLLER_PORTS ${#CLUSTER_CONTROLLER_PORTS[@]}: one of each per node"
	for p in "${CLUSTER_PORTS[@]}" "${CLUSTER_CONTROLLER_PORTS[@]}"; do
		[[ "$p" =~ ^[1-9][0-9]{0,4}$ ]] && ((p < 65536)) ||
			die "KAFKA_CLUSTER_PORTS / KAFKA_CLUSTER_CONTROLLER_PORTS: '$p' is not a port number"
		[[ "$all" != *" $p "* ]] || die "port $p is listed twice in KAFKA_CLUSTER_PORTS / KAFKA_CLUSTER_CONTROLLER_PORTS"
		all+="$p "
	done
	CLUSTER_RF="${KAFKA_CLUSTER_REPLICATION_FACTOR:-$((n < 3 ? n : 3))}"
	[[ "$CLUSTER_RF" =~ ^[1-9][0-9]*$ ]] && ((CLUSTER_RF <= n)) ||
		die "KAFKA_CLUSTER_REPLICATION_FACTOR must be from 1 to the number of nodes ($n), got '$CLUSTER_RF'"
	CLUSTER_MIN_ISR="${KAFKA_CLUSTER_MIN_ISR:-$((CLUSTER_RF >= 3 ? 2 : 1))}"
	[[ "$CLUSTER_MIN_ISR" =~ ^[1-9][0-9]*$ ]] && ((CLUSTER_MIN_ISR <= CLUSTER_RF)) ||
		die "KAFKA_CLUSTER_MIN_ISR must be from 1 to the replication factor ($CLUSTER_RF), got '$CLUSTER_MIN_ISR'"
	CLUSTER_VOTERS=
	for ((i = 1; i <= n; i++)); do
		CLUSTER_VOTERS+="${CLUSTER_VOTERS:+,}$i@$KAFKA_HOST:${CLUSTER_CONTROLLER_PORTS[i - 1]}"
	done
}

cluster_size() { printf '%s\n' "${#CLUSTER_PORTS[@]}"; }
node_dir() { printf '%s\n' "$CLUSTER_DIR/node-$1"; }

cluster_bootstrap() {
	local p out=
	for p in "${CLUSTER_PORTS[@]}"; do out+="${out:+,}$KAFKA_HOST:$p"; done
	printf '%s\n' "$out"
}

# ensure_cluster_id: sets CLUSTER_ID to the id every node is formatted with:
# KAFKA_CLUSTER_ID, else the one kept in $CLUSTER_DIR/cluster.id, chosen on
# first use (link(2) makes the first writer win).
ensure_cluster_id() {
	local f="$CLUSTER_DIR/cluster.id" id
	mkdir -p "$CLUSTER_DIR"
	if [[ ! -s "$f" ]]; then
		id="${KAFKA_CLUSTER_ID:-$(new_cluster_id)}"
		printf '%s\n' "$id" >"$f.$$"
		ln "$f.$$" "$f" 2>/dev/null || true
		rm -f "$f.$$"
	fi
	CLUSTER_ID="$(<"$f")"
	[[ -z "${KAFKA_CLUSTER_ID:-}" || "$KAFKA_CLUSTER_ID" == "$CLUSTER_ID" ]] ||
		die "$CLUSTER_DIR belongs to cluster $CLUSTER_ID, not KAFKA_CLUSTER_ID=$KAFKA_CLUSTER_ID (unset it, or: compose/kafka.sh cluster-wipe)"
}

# node_run N COMMAND [ARGS...]: this script's COMMAND for node N of the cluster.
node_run() {
	local n="$1" id=()
	shift
	[[ -z "$CLUSTER_ID" ]] || id=("KAFKA_CLUSTER_ID=$CLUSTER_ID")
	env "${id[@]}" KAFKA_NODE_ID="$n" KAFKA_PORT="${CLUSTER_PORTS[n - 1]}" \
		KAFKA_CONTROLLER_PORT="${CLUSTER_CONTROLLER_PORTS[n - 1]}" HOOKLINE_KAFKA_DIR="$(node_dir "$n")" \
		KAFKA_JARS_DIR="$JARS_DIR" KAFKA_QUORUM_VOTERS="$CLUSTER_VOTERS" KAFKA_REPLICATION_FACTOR="$CLUSTER_RF" \
		KAFKA_MIN_ISR="$CLUSTER_MIN_ISR" KAFKA_HEAP_OPTS="$KAFKA_CLUSTER_HEAP_OPTS" \
		KAFKA_PORT_NAMES="KAFKA_CLUSTER_PORTS / KAFKA_CLUSTER_CONTROLLER_PORTS" \
		"$SELF" "$@" 8>&- 9>&-
}

# registered_nodes: how many of the cluster's nodes one metadata request lists.
registered_nodes() {
	local listed i count=0
	listed="$(metadata_brokers "$(cluster_bootstrap)" 2>/dev/null)" || listed=
	for ((i = 1; i <= $(cluster_size); i++)); do
		! grep -qx "$i $KAFKA_HOST:${CLUSTER_PORTS[i - 1]}" <<<"$listed" || count=$((count + 1))
	done
	printf '%s\n' "$count"
}

cmd_cluster_up() {
	local t0 n i pids=() started=() failed=() out
	t0="$(now_ms)"
	n="$(cluster_size)"
	check_settings
	ensure_jars # once here, not three times in parallel
	ensure_cluster_id
	# The nodes start in parallel: a KRaft quorum elects a leader only once a
	# majority of its voters run, so no node can become ready on its own.
	for ((i = 1; i <= n; i++)); do
		if node_run "$i" status >/dev/null 2>&1; then
			say "node $i already running"
			continue
		fi
		out="$(node_dir "$i")/up.out"
		mkdir -p "$(node_dir "$i")"
		node_run "$i" up >"$out" 2>&1 &
		pids[i]=$!
		started+=("$i")
	done
	for i in "${started[@]}"; do
		if wait "${pids[i]}"; then
			sed "s/^kafka.sh: /kafka.sh: node $i: /" "$(node_dir "$i")/up.out"
		else
			failed+=("$i")
		fi
	done
	if ((${#failed[@]} > 0)); then
		for i in "${failed[@]}"; do
			err "node $i did not start:"
			sed 's/^/    /' "$(node_dir "$i")/up.out" >&2
		done
		err "killing the nodes this command started (${started[*]})"
		for i in "${started[@]}"; do node_run "$i" kill >/dev/null 2>&1 || true; done
		exit 1
	fi
	local deadline=$((SECONDS + KAFKA_START_TIMEOUT)) count
	while count="$(registered_nodes)" && ((count < n)); do
		((SECONDS < deadline)) || die "only $count of $n brokers registered after ${KAFKA_START_TIMEOUT} s (compose/kafka.sh cluster-status)"
		sleep 0.25
	done
	say "cluster ready: $n brokers on $(cluster_bootstrap) (cluster id $CLUSTER_ID, replication factor $CLUSTER_RF, min.insync.replicas $CLUSTER_MIN_ISR, $(elapsed "$t0")); dir $CLUSTER_DIR"
}

cmd_cluster_down() {
	local t0 n i pids=() rc=0
	t0="$(now_ms)"
	n="$(cluster_size)"
	# In parallel: stopped one by one, the last nodes lose their quorum and
	# wait out KAFKA_STOP_TIMEOUT before they are killed.
	for ((i = 1; i <= n; i++)); do
		[[ -d "$(node_dir "$i")" ]] || continue
		node_run "$i" down 2>&1 | sed "s/^kafka.sh: /kafka.sh: node $i: /" &
		pids[i]=$!
	done
	for i in "${!pids[@]}"; do wait "${pids[i]}" || rc=1; done
	((rc == 0)) || die "stopping the cluster failed"
	say "cluster stopped in $(elapsed "$t0")"
}

cmd_cluster_status() {
	local n i out running=0 count
	n="$(cluster_size)"
	for ((i = 1; i <= n; i++)); do
		if out="$(node_run "$i" status 2>&1)"; then running=$((running + 1)); fi
		printf '%s\n' "${out/#kafka.sh: /kafka.sh: node $i: }"
	done
	count=0
	((running == 0)) || count="$(registered_nodes)"
	say "$running of $n nodes running, $count of $n brokers registered ($(cluster_bootstrap))"
	((running == n && count == n))
}

cmd_cluster_wipe() {
	local i
	cmd_cluster_down
	for ((i = 1; i <= $(cluster_size); i++)); do rm -rf "$(node_dir "$i")"; done
	rm -f "$CLUSTER_DIR/cluster.id"
	rmdir "$CLUSTER_DIR" 2>/dev/null || true
	say "wiped the cluster's data and logs in $CLUSTER_DIR (jars kept in $JARS_DIR)"
}

cmd_node() {
	local n="${1:-}" cmd="${2:-}"
	[[ "$n" =~ ^[1-9][0-9]*$ ]] && ((n <= $(cluster_size))) ||
		die "usage: compose/kafka.sh node N up|down|kill|status|logs [ARGS] (N from 1 to $(cluster_size))"
	shift 2
	case "$cmd" in
	up) ensure_cluster_id ;;
	down | kill | status | logs) ;;
	*) die "usage: compose/kafka.sh node N up|down|kill|status|logs [ARGS]" ;;
	esac
	node_run "$n" "$cmd" "$@"
}

# ---------------------------------------------------------------- secure
#
# A second single-node instance of this script whose client listener is
# SASL_SSL with SCRAM-SHA-512, beside the plaintext one (own dir, own ports).
# Its CA and certificate are made here with openssl; its SCRAM users (admin,
# and one per service) exist from its first start; StandardAuthorizer with
# allow.everyone.if.no.acl.found=false, so a user may do only what an ACL
# grants (pkg/kafkaacl holds the ACLs; admin is the super user). The
# controller listener, loopback only, takes SASL/PLAIN from admin alone.

SECURE_DIR="${KAFKA_SECURE_DIR:-$REPO_ROOT/.kafka-secure}"
[[ "$SECURE_DIR" == /* ]] || SECURE_DIR="$PWD/$SECURE_DIR"
# Three and four above the plaintext broker's port unless set (check_settings
# checks KAFKA_PORT; a bad one gives the fixed 9095 and 9096 meanwhile).
if [[ "$KAFKA_PORT" =~ ^[1-9][0-9]{0,4}$ ]]; then
	KAFKA_SECURE_PORT="${KAFKA_SECURE_PORT:-$((KAFKA_PORT + 3))}"
	KAFKA_SECURE_CONTROLLER_PORT="${KAFKA_SECURE_CONTROLLER_PORT:-$((KAFKA_PORT + 4))}"
fi
KAFKA_SECURE_PORT="${KAFKA_SECURE_PORT:-9095}"
KAFKA_SECURE_CONTROLLER_PORT="${KAFKA_SECURE_CONTROLLER_PORT:-9096}"
KAFKA_SECURE_HEAP_OPTS="${KAFKA_SECURE_HEAP_OPTS:--Xms384m -Xmx384m}"
readonly SECURE_USERS="admin ingest processor retrier dlq"
SECURE_JARS_DIR="${KAFKA_JARS_DIR:-$REPO_ROOT/.kafka/jars}"

check_secure_settings() {
	local p
	for p in "$KAFKA_SECURE_PORT" "$KAFKA_SECURE_CONTROLLER_PORT"; do
		[[ "$p" =~ ^[1-9][0-9]{0,4}$ ]] && ((p < 65536)) ||
			die "KAFKA_SECURE_PORT / KAFKA_SECURE_CONTROLLER_PORT: '$p' is not a port number"
	done
	[[ "$KAFKA_SECURE_PORT" != "$KAFKA_SECURE_CONTROLLER_PORT" ]] || die "KAFKA_SECURE_PORT and KAFKA_SECURE_CONTROLLER_PORT must differ"
}

# secure_password USER: the user's password, from its env file (made once).
secure_password() { sed -n 's/^KAFKA_SASL_PASSWORD=//p' "$SECURE_DIR/$1.env"; }

# secure_materials: CA, broker certificate, users' env files, the broker's
# extra properties and the admin's client configs, each made once (the
# properties on every start: the ports may change).
secure_materials() {
	local d="$SECURE_DIR" u pw admin
	command -v openssl >/dev/null 2>&1 || die "openssl not found: it makes the secure broker's CA and certificate"
	mkdir -p "$d"
	chmod 700 "$d"
	if [[ ! -s "$d/ca.pem" || ! -s "$d/broker.pem" ]]; then
		# A CA, and a certificate for 127.0.0.1 and localhost signed by it.
		openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=hookline local CA" \
			-keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null || die "openssl: making the CA failed"
		openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=127.0.0.1" \
			-keyout "$d/broker.key" -out "$d/broker.csr" 2>/dev/null || die "openssl: making the broker key failed"
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/broker.ext"
		openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 3650 -sha256 \
			-extfile "$d/broker.ext" -out "$d/broker.crt" 2>/dev/null || die "openssl: signing the broker certificate failed"
		# Kafka's PEM key store: the PKCS#8 key, then the chain.
		openssl pkcs8 -topk8 -nocrypt -in "$d/broker.key" -out "$d/broker.key.pk8" || die "openssl: converting the broker key failed"
		cat "$d/broker.key.pk8" "$d/broker.crt" "$d/ca.pem" >"$d/broker.pem"
		rm -f "$d/broker.csr" "$d/broker.ext" "$d/broker.key.pk8" "$d/ca.srl"
		chmod 600 "$d/ca.key" "$d/broker.key" "$d/broker.pem"
		say "made a CA ($d/ca.pem) and the broker's certificate for 127.0.0.1"
	fi
	for u in $SECURE_USERS; do
		# The users were formatted into the data dir: a lost password cannot be made again.
		[[ -s "$d/$u.env" || ! -f "$d/data/meta.properties" ]] ||
			die "$d/$u.env is gone but the broker's data holds its user: compose/kafka.sh secure-wipe, then secure-up"
		if [[ -s "$d/$u.env" ]]; then pw="$(secure_password "$u")"; else pw="$(openssl rand -hex 24)"; fi
		[[ "$pw" =~ ^[0-9a-f]{48}$ ]] || die "$d/$u.env: no password in it (delete it and run compose/kafka.sh secure-wipe)"
		(
			umask 077
			{
				printf '# %s on the local secure broker (compose/kafka.sh secure-up): set -a; . %s\n' "$u" "$d/$u.env"
				printf 'KAFKA_BROKERS=%s:%s\nKAFKA_TLS=true\nKAFKA_TLS_CA_FILE=%s\n' "$KAFKA_HOST" "$KAFKA_SECURE_PORT" "$d/ca.pem"
				printf 'KAFKA_SASL_MECHANISM=SCRAM-SHA-512\nKAFKA_SASL_USER=%s\nKAFKA_SASL_PASSWORD=%s\n' "$u" "$pw"
			} >"$d/$u.env.tmp"
			mv "$d/$u.env.tmp" "$d/$u.env"
		)
	done
	admin="$(secure_password admin)"
	(
		umask 077
		for u in $SECURE_USERS; do printf 'SCRAM-SHA-512=[name=%s,password=%s]\n' "$u" "$(secure_password "$u")"; done >"$d/scram"
		cat >"$d/secure.properties" <<-EOF
			listeners=SASL_SSL://$KAFKA_HOST:$KAFKA_SECURE_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_SECURE_CONTROLLER_PORT
			advertised.listeners=SASL_SSL://$KAFKA_HOST:$KAFKA_SECURE_PORT
			listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
			inter.broker.listener.name=SASL_SSL
			sasl.enabled.mechanisms=SCRAM-SHA-512
			sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
			listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
			sasl.mechanism.controller.protocol=PLAIN
			listener.name.controller.sasl.enabled.mechanisms=PLAIN
			listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin" user_admin="$admin";
			ssl.keystore.type=PEM
			ssl.keystore.location=$d/broker.pem
			ssl.truststore.type=PEM
			ssl.truststore.location=$d/ca.pem
			authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
			allow.everyone.if.no.acl.found=false
			super.users=User:admin
		EOF
		cat >"$d/admin.properties" <<-EOF
			security.protocol=SASL_SSL
			sasl.mechanism=SCRAM-SHA-512
			sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
			ssl.truststore.type=PEM
			ssl.truststore.location=$d/ca.pem
		EOF
	)
}

# secure_run COMMAND [ARGS...]: this script's COMMAND for the secure instance.
secure_run() {
	env HOOKLINE_KAFKA_DIR="$SECURE_DIR" KAFKA_PORT="$KAFKA_SECURE_PORT" KAFKA_CONTROLLER_PORT="$KAFKA_SECURE_CONTROLLER_PORT" \
		KAFKA_NODE_ID=1 KAFKA_QUORUM_VOTERS="1@$KAFKA_HOST:$KAFKA_SECURE_CONTROLLER_PORT" KAFKA_JARS_DIR="$SECURE_JARS_DIR" \
		KAFKA_REPLICATION_FACTOR=1 KAFKA_MIN_ISR=1 KAFKA_HEAP_OPTS="$KAFKA_SECURE_HEAP_OPTS" \
		KAFKA_EXTRA_CONFIG="$SECURE_DIR/secure.properties" KAFKA_SCRAM_FILE="$SECURE_DIR/scram" \
		KAFKA_CLIENT_CONFIG="$SECURE_DIR/admin.properties" KAFKA_READY_CHECK=java \
		KAFKA_PORT_NAMES="KAFKA_SECURE_PORT / KAFKA_SECURE_CONTROLLER_PORT" \
		"$SELF" "$@" 8>&- 9>&-
}

# secure_acls PREFIX: the ACLs of every service for topics and groups named
# with PREFIX (HOOKLINE_TOPIC_PREFIX), granted as admin (pkg/kafkaacl).
secure_acls() {
	command -v "${GO:-go}" >/dev/null 2>&1 || die "go not found: the ACLs are granted by compose/kafkaacl (go run)"
	(cd "$REPO_ROOT" && "${GO:-go}" run ./compose/kafkaacl -env "$SECURE_DIR/admin.env" -prefix "$1")
}

cmd_secure_up() {
	local t0
	t0="$(now_ms)"
	mkdir -p "$SECURE_DIR"
	lock 8 "$SECURE_DIR/.setup.lock"
	if [[ -f "$SECURE_DIR/ready" ]] && secure_run status >/dev/null 2>&1; then
		# Started with other ports: its env files name those, not the ones asked for.
		local want="SASL_SSL://$KAFKA_HOST:$KAFKA_SECURE_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_SECURE_CONTROLLER_PORT" has
		has="$(prop_of listeners "$SECURE_DIR/secure.properties" 2>/dev/null)" || has="(none recorded)"
		[[ "$has" == "$want" ]] ||
			die "this checkout's secure broker already runs with listeners $has, not KAFKA_SECURE_PORT=$KAFKA_SECURE_PORT / KAFKA_SECURE_CONTROLLER_PORT=$KAFKA_SECURE_CONTROLLER_PORT: compose/kafka.sh secure-down first, or use its ports"
		say "secure broker already running on $KAFKA_HOST:$KAFKA_SECURE_PORT; env files in $SECURE_DIR"
		return 0
	fi
	rm -f "$SECURE_DIR/ready"
	secure_materials
	secure_run up 2>&1 | sed 's/^kafka.sh: /kafka.sh: secure: /' || die "the secure broker did not start"
	secure_acls "${HOOKLINE_TOPIC_PREFIX:-}"
	touch "$SECURE_DIR/ready"
	say "secure broker ready on $KAFKA_HOST:$KAFKA_SECURE_PORT (SASL_SSL, SCRAM-SHA-512, $(elapsed "$t0")); for a service: set -a; . $SECURE_DIR/<ingest|processor|retrier|dlq|admin>.env"
}

cmd_secure_down() {
	mkdir -p "$SECURE_DIR"
	lock 8 "$SECURE_DIR/.setup.lock"
	rm -f "$SECURE_DIR/ready"
	secure_run down | sed 's/^kafka.sh: /kafka.sh: secure: /'
}

cmd_secure_wipe() {
	cmd_secure_down
	local f
	# The users are formatted into the data dir: new passwords need new data.
	for f in data logs server.properties log4j2.properties kafka.pid secure.properties scram admin.properties ca.pem ca.key broker.pem broker.key broker.crt; do
		rm -rf "${SECURE_DIR:?}/$f"
	done
	for f in $SECURE_USERS; do rm -f "$SECURE_DIR/$f.env"; done
	say "wiped the secure broker's data, certificates and users in $SECURE_DIR"
}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

main() {
	local cmd="${1:-}"
	[[ $# -eq 0 ]] || shift
	case "$cmd" in
	up) check_settings && cmd_up ;;
	down) check_settings && cmd_down ;;
	kill) check_settings && cmd_kill ;;
	status) cmd_status ;;
	wipe) check_settings && cmd_wipe ;;
	logs) cmd_logs "$@" ;;
	classpath) ensure_jars >&2 && tools_classpath ;;
	bootstrap) printf '%s\n' "$BOOTSTRAP" ;;
	perf)
		check_settings
		# A named broker need not be this instance (a worktree, another host).
		if has_bootstrap_arg "$@"; then run_tool org.apache.kafka.tools.ProducerPerformance "$@"; fi
		require_running
		run_tool org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$BOOTSTRAP" "$@"
		;;
	topics)
		check_settings
		# A named broker need not be this instance (a worktree, another host).
		if has_bootstrap_arg "$@"; then run_tool org.apache.kafka.tools.TopicCommand "$@"; fi
		require_running
		run_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" "$@"
		;;
	tool)
		[[ $# -ge 1 ]] || die "usage: compose/kafka.sh tool MAIN_CLASS [ARGS...]"
		check_settings
		run_tool "$@"
		;;
	cluster-up) check_cluster_settings && cmd_cluster_up ;;
	cluster-down) check_cluster_settings && cmd_cluster_down ;;
	cluster-status) check_cluster_settings && cmd_cluster_status ;;
	cluster-wipe) check_cluster_settings && cmd_cluster_wipe ;;
	cluster-bootstrap) check_cluster_settings && cluster_bootstrap ;;
	node) check_cluster_settings && cmd_node "$@" ;;
	secure-up) check_settings && check_secure_settings && cmd_secure_up ;;
	secure-down) check_secure_settings && cmd_secure_down ;;
	secure-status) check_secure_settings && secure_run status ;;
	secure-wipe) check_secure_settings && cmd_secure_wipe ;;
	secure-acls)
		check_secure_settings
		secure_run status >/dev/null || die "the secure broker is not running: compose/kafka.sh secure-up"
		secure_acls "${1:-}"
		;;
	secure-bootstrap) printf '%s:%s\n' "$KAFKA_HOST" "$KAFKA_SECURE_PORT" ;;
	help | -h | --help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
