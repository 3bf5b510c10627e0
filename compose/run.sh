#!/usr/bin/env bash
# Runs hookline on a laptop, in the foreground: the local sink the dev
# providers deliver to (compose/sink), ingest, processor, retrier and
# dlq serve (the console), all from bin/. Once ingest and the console answer,
# it prints the console's address with its token and a curl that sends a
# signed delivery. Ctrl-C or SIGTERM stops everything it started.
#
# Broker: with HOOKLINE_RUN_KAFKA=local (make run sets it when KAFKA_BROKERS
# is unset) it starts compose/kafka.sh's broker unless that one is already
# running, and stops it at the end only if it started it; the last line says
# which. Otherwise it uses KAFKA_BROKERS and leaves the broker alone.
#
# Settings (environment, with defaults; the services' own variables pass through):
#   HOOKLINE_PROVIDERS=compose/providers.dev.yaml  HOOKLINE_RETRY_TIERS=5s,20s,1m
#   HOOKLINE_INGEST_ADDR=:8080  HOOKLINE_ADMIN_ADDR=127.0.0.1:8081  HOOKLINE_SINK_ADDR=127.0.0.1:8090
#   HOOKLINE_PROCESSOR_METRICS_ADDR=:9101  HOOKLINE_RETRIER_METRICS_ADDR=:9102
#   HOOKLINE_ADMIN_TOKEN (unset: one is generated for this run)
#   HOOKLINE_RUN_READY_TIMEOUT=120 (seconds to wait for ingest and the console)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'run: %s\n' "$*" >&2; }

: "${KAFKA_BROKERS:=127.0.0.1:9092}"
: "${HOOKLINE_PROVIDERS:=compose/providers.dev.yaml}"
: "${HOOKLINE_RETRY_TIERS:=5s,20s,1m}"
: "${HOOKLINE_INGEST_ADDR:=:8080}"
: "${HOOKLINE_ADMIN_ADDR:=127.0.0.1:8081}"
: "${HOOKLINE_SINK_ADDR:=127.0.0.1:8090}"
: "${HOOKLINE_PROCESSOR_METRICS_ADDR:=:9101}"
: "${HOOKLINE_RETRIER_METRICS_ADDR:=:9102}"
: "${HOOKLINE_RUN_READY_TIMEOUT:=120}"
export KAFKA_BROKERS HOOKLINE_PROVIDERS HOOKLINE_RETRY_TIERS HOOKLINE_INGEST_ADDR HOOKLINE_ADMIN_ADDR
if [ -z "${STRIPE_WEBHOOK_SECRET:-}${GITHUB_WEBHOOK_SECRET:-}${ACME_SECRET:-}" ]; then
  say "using development secrets (dev-stripe-secret, dev-github-secret, dev-acme-secret)"
fi
export STRIPE_WEBHOOK_SECRET="${STRIPE_WEBHOOK_SECRET:-dev-stripe-secret}"
export GITHUB_WEBHOOK_SECRET="${GITHUB_WEBHOOK_SECRET:-dev-github-secret}"
export ACME_SECRET="${ACME_SECRET:-dev-acme-secret}"

for b in sink ingest processor retrier dlq; do
  [ -x "bin/$b" ] || { say "bin/$b is missing (run make build)"; exit 1; }
done
command -v openssl >/dev/null || { say "openssl is needed (to sign the example delivery)"; exit 1; }

# The console's token: the caller's, or a new one for this run (a fixed
# value in the repository would let anything on this machine that read it
# call the admin API of every make run).
token_note="HOOKLINE_ADMIN_TOKEN, generated for this run"
if [ -z "${HOOKLINE_ADMIN_TOKEN:-}" ]; then
  HOOKLINE_ADMIN_TOKEN="$(openssl rand -hex 16)"
else
  token_note="HOOKLINE_ADMIN_TOKEN, from your environment"
fi
export HOOKLINE_ADMIN_TOKEN

# The dev providers file names the sink at 127.0.0.1:8090; another address
# gets a copy of the file that names it.
tmp="$(mktemp -d "${TMPDIR:-/tmp}/hookline-run.XXXXXX")"
if [ "$HOOKLINE_SINK_ADDR" != 127.0.0.1:8090 ] && [ "$HOOKLINE_PROVIDERS" = compose/providers.dev.yaml ]; then
  sed "s#http://127.0.0.1:8090/#http://$HOOKLINE_SINK_ADDR/#" compose/providers.dev.yaml >"$tmp/providers.yaml"
  HOOKLINE_PROVIDERS="$tmp/providers.yaml"
fi

# The broker.
broker=given
if [ "${HOOKLINE_RUN_KAFKA:-}" = local ]; then
  if compose/kafka.sh status >/dev/null 2>&1; then
    broker=before
    say "broker already running on $KAFKA_BROKERS: it will be left running"
  else
    compose/kafka.sh up || { rm -rf "$tmp"; say "broker did not start"; exit 1; }
    broker=started
  fi
fi

# shellcheck source=procs.sh
. compose/procs.sh # the script runs from the repository root (cd above)
start sink bin/sink -addr "$HOOKLINE_SINK_ADDR"
start ingest bin/ingest
start processor env HOOKLINE_METRICS_ADDR="$HOOKLINE_PROCESSOR_METRICS_ADDR" bin/processor
start retrier env HOOKLINE_METRICS_ADDR="$HOOKLINE_RETRIER_METRICS_ADDR" bin/retrier

# dlq serve needs the topics, which ingest creates: it starts once ingest is
# ready. Then say how to use them.
host_of() { case "$1" in :*) echo "127.0.0.1$1" ;; *) echo "$1" ;; esac; }
ingest="http://$(host_of "$HOOKLINE_INGEST_ADDR")"
console="http://$(host_of "$HOOKLINE_ADMIN_ADDR")"
# alive: every process started is still running.
alive() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done; }
# await URL [curl args]: 0 once URL answers 2xx, 1 on Ctrl-C, a service gone or the deadline.
await() {
  local url=$1 deadline=$((SECONDS + HOOKLINE_RUN_READY_TIMEOUT))
  shift
  until curl -sf -o /dev/null "$@" "$url"; do
    [ "$stopped" = 0 ] && alive || return 1
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$url did not answer within ${HOOKLINE_RUN_READY_TIMEOUT}s; see the logs above"
      return 1
    fi
    sleep 0.5
  done
}
ready=0
if await "$ingest/readyz"; then
  start "dlq serve" bin/dlq serve
  await "$console/providers" -H "Authorization: Bearer $HOOKLINE_ADMIN_TOKEN" && ready=1
fi
if [ "$ready" = 1 ]; then
  id="evt_$(date +%s)_1"
  body="{\"id\":\"$id\",\"type\":\"order.created\"}"
  sig="$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$ACME_SECRET" | sed 's/^.* //')"
  cat >&2 <<MSG

run: ready. Console: $console/ui/#token=$HOOKLINE_ADMIN_TOKEN
run: token: $HOOKLINE_ADMIN_TOKEN ($token_note)
run: send a signed acme delivery (the sink prints a line per call; retry tiers $HOOKLINE_RETRY_TIERS):
curl -si $ingest/webhooks/acme -H 'Content-Type: application/json' -H 'X-Acme-Signature: sha256=$sig' --data-binary '$body'
run: its trace: curl -s -H 'Authorization: Bearer $HOOKLINE_ADMIN_TOKEN' $console/events/acme:$id
run: Ctrl-C stops everything make run started.

MSG
elif [ "$stopped" = 0 ]; then
  status=1
  stop
fi

# When any service exits (or on Ctrl-C), stop the rest and wait for them.
if [ "$stopped" = 0 ]; then
  wait -n "${pids[@]}" || status=$?
  [ "$signalled" = 0 ] || status=0 # asked to stop: not a failure
  stop
fi
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
rm -rf "$tmp"
case "$broker" in
started)
  compose/kafka.sh down >&2 || status=1
  say "broker stopped: make run had started it" ;;
before) say "broker left running: it was running before make run ($KAFKA_BROKERS; make kafka-down stops it)" ;;
*) say "broker not touched: KAFKA_BROKERS=$KAFKA_BROKERS was given" ;;
esac
exit "$status"
