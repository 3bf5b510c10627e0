#!/usr/bin/env bash
# compare.sh: the processor and end-to-end benchmarks of two builds,
# alternated in one run against one broker (make bench-compare OLD=<rev>).
#
# Each round runs bench-processor with one build, then the other, then
# bench-e2e the same way (odd rounds old first, even rounds new first); each side's benchmark program is built from
# its own tree and starts its own tree's services (HOOKLINE_BIN_DIR). The
# summary gives each round's figures and the ratios new/old of adjacent runs
# (min, median, max over the rounds): on a shared machine only those mean
# anything. The load average is printed before every run.
#
# Environment:
#   OLD        a revision: built in a temporary worktree, removed at the end
#   OLD_DIR    or a tree already checked out (its binaries are rebuilt)
#   NEW_DIR    the new tree (default: this repository)
#   ROUNDS     rounds (default 3)
#   PROC_FLAGS bench-processor flags (default: a short round, no fan-out)
#   E2E_FLAGS  bench-e2e flags (default: a short round at a fixed rate)
#   SKIP_E2E=1 / SKIP_PROC=1 leave a benchmark out
#   OUT        directory of the logs (default: a temporary one, printed)
#   SUMMARY_ONLY=1 with OUT: print the summary of the logs there again
#   KAFKA_BROKERS the broker both sides use (required)
set -euo pipefail

: "${KAFKA_BROKERS:?set KAFKA_BROKERS to the broker both builds use}"
ROUNDS=${ROUNDS:-3}
PROC_FLAGS=${PROC_FLAGS:--n 30000 -slow-n 5000 -routes-n 0}
E2E_FLAGS=${E2E_FLAGS:--c 16 -d 5s -open-rate 500 -open-d 10s -perf-n 20000 -iso-alone 2s -iso-together 2s -ord-entities 1000 -ord-fail-entities 8 -ord-rate 200 -ord-d 2s}
NEW_DIR=$(cd "${NEW_DIR:-$(git rev-parse --show-toplevel)}" && pwd)
OUT=${OUT:-$(mktemp -d -t bench-compare.XXXXXX)}
mkdir -p "$OUT"

cleanup=""
if [[ -n "${SUMMARY_ONLY:-}" ]]; then
	ROUNDS=0 OLD_DIR=$NEW_DIR
elif [[ -z "${OLD_DIR:-}" ]]; then
	: "${OLD:?set OLD (a revision) or OLD_DIR (a tree)}"
	OLD_DIR=$(mktemp -d -t bench-compare-old.XXXXXX)
	git -C "$NEW_DIR" worktree add --detach "$OLD_DIR" "$OLD" >/dev/null
	cleanup="$OLD_DIR"
	trap 'git -C "$NEW_DIR" worktree remove --force "$cleanup"' EXIT
fi
OLD_DIR=$(cd "$OLD_DIR" && pwd)

build() { # build <tree>: the services and the two benchmark programs into <tree>/bin
	(cd "$1" && make -s build && go build -o bin/bench-processor ./pkg/bench/processor && go build -o bin/bench-e2e ./pkg/bench/e2e)
}
if [[ -z "${SUMMARY_ONLY:-}" ]]; then
	build "$OLD_DIR"
	build "$NEW_DIR"
fi
echo "old: $(git -C "$OLD_DIR" log -1 --format='%h %s' | cut -c1-80)"
echo "new: $(git -C "$NEW_DIR" log -1 --format='%h %s' | cut -c1-80)"
echo "logs: $OUT; rounds: $ROUNDS"
echo "bench-processor $PROC_FLAGS"
echo "bench-e2e $E2E_FLAGS"

bench() { # bench <program> <side> <round> <flags>: one run, its log in $OUT
	local dir=$OLD_DIR
	[[ $2 == new ]] && dir=$NEW_DIR
	local log="$OUT/$1-$3-$2.log"
	echo "$(date +%T) round $3 $1 $2: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
	# shellcheck disable=SC2086 # the flags are words
	if ! HOOKLINE_BIN_DIR="$dir/bin" "$dir/bin/$1" $4 >"$log" 2>&1; then
		echo "  failed: see $log"
	fi
}

# Odd rounds run old first, even rounds new first, so that a drift of the
# machine's load over the run does not favour one side.
for r in $(seq "$ROUNDS"); do
	sides="old new"
	((r % 2)) || sides="new old"
	for s in $sides; do
		[[ -n "${SKIP_PROC:-}" ]] || bench bench-processor "$s" "$r" "$PROC_FLAGS"
	done
	for s in $sides; do
		[[ -n "${SKIP_E2E:-}" ]] || bench bench-e2e "$s" "$r" "$E2E_FLAGS"
	done
done

# figures <log>: the measures of one run, "name=value" a word.
proc_figures() {
	awk '/^processor, first-seen, no destination/ {printf "first_eps=%s first_us=%s ", $(NF-1), $NF}
	     /^processor, duplicates/ {printf "dup_eps=%s dup_us=%s ", $(NF-1), $NF}
	     /^processor, destination 50 ms/ {printf "slow_eps=%s slow_us=%s ", $(NF-1), $NF}' "$1"
}
e2e_figures() { # the open-loop phase: p50, p99 (and their parts), the processor's CPU per event
	awk '/^open loop, [0-9]+\/s +[0-9]/ {printf "open_p50=%s open_p99=%s ", $(NF-2), $(NF-1)}
	     /^open loop, [0-9]+\/s:$/ {open=1}
	     open && /took it up/ {printf "pickup_p99=%s ", $(NF-1)}
	     open && /outcome visible/ {printf "commit_p50=%s commit_p99=%s ", $(NF-4), $(NF-1)}
	     open && /CPU per event:/ {for (i = 1; i <= NF; i++) if ($i == "processor") printf "open_proc_us=%s ", $(i+1); open=0}' "$1"
}

[[ -n "${SUMMARY_ONLY:-}" ]] && ROUNDS=$(find "$OUT" -name 'bench-*-new.log' | sed 's/.*-\([0-9]*\)-new.log/\1/' | sort -n | tail -1)

summary() { # summary <program> <extract>
	local prog=$1 extract=$2
	echo
	echo "== $prog: per round, old / new"
	local r ratios=""
	for r in $(seq "$ROUNDS"); do
		local o n
		o=$($extract "$OUT/$prog-$r-old.log")
		n=$($extract "$OUT/$prog-$r-new.log")
		echo "round $r old: $o"
		echo "round $r new: $n"
		ratios+="$o|$n"$'\n'
	done
	echo "== $prog: ratio new/old by round (min median max)"
	printf '%s' "$ratios" | awk -F'|' '
		{ split($1, a, " "); split($2, b, " ")
		  for (i in a) { split(a[i], kv, "="); old[kv[1]] = kv[2] }
		  for (i in b) { split(b[i], kv, "="); if ((kv[1] in old) && old[kv[1]] > 0) { k = kv[1]; v[k, ++cnt[k]] = kv[2] / old[k] } }
		  delete old }
		END { for (k in cnt) {
			m = cnt[k]; for (i = 1; i <= m; i++) x[i] = v[k, i]
			for (i = 2; i <= m; i++) { t = x[i]; j = i - 1; while (j > 0 && x[j] > t) { x[j+1] = x[j]; j-- } x[j+1] = t }
			med = (m % 2) ? x[(m+1)/2] : (x[m/2] + x[m/2+1]) / 2
			line = ""; for (i = 1; i <= m; i++) line = line sprintf(" %.2f", v[k, i])
			printf "%-14s %.2f %.2f %.2f  (rounds:%s)\n", k, x[1], med, x[m], line } }' | sort
}
{
	[[ -z "${SKIP_PROC:-}" ]] && summary bench-processor proc_figures
	[[ -z "${SKIP_E2E:-}" ]] && summary bench-e2e e2e_figures
	echo
	echo "load average before each run:"
	cat "$OUT/load.txt"
} | tee "$OUT/summary.txt"
