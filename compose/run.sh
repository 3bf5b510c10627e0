#!/usr/bin/env bash
# Runs every built hookline service in the foreground against KAFKA_BROKERS
# (make run starts a local broker and sets it). Ctrl-C or SIGTERM stops them
# all gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${KAFKA_BROKERS:=127.0.0.1:9092}"
: "${HOOKLINE_PROVIDERS:=compose/providers.dev.yaml}"
export KAFKA_BROKERS HOOKLINE_PROVIDERS
if [ -z "${STRIPE_WEBHOOK_SECRET:-}${GITHUB_WEBHOOK_SECRET:-}${ACME_SECRET:-}" ]; then
  echo "run: using development secrets (dev-stripe-secret, dev-github-secret, dev-acme-secret)" >&2
fi
export STRIPE_WEBHOOK_SECRET="${STRIPE_WEBHOOK_SECRET:-dev-stripe-secret}"
export GITHUB_WEBHOOK_SECRET="${GITHUB_WEBHOOK_SECRET:-dev-github-secret}"
export ACME_SECRET="${ACME_SECRET:-dev-acme-secret}"

pids=()
stop() {
  trap - INT TERM
  echo "run: stopping ${#pids[@]} services" >&2
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}
trap stop INT TERM

for svc in ingest processor retrier; do
  if [ -x "bin/$svc" ]; then
    echo "run: starting $svc" >&2
    "bin/$svc" &
    pids+=($!)
  fi
done
[ ${#pids[@]} -gt 0 ] || { echo "run: no service in bin/ (run make build)" >&2; exit 1; }

# When any service exits (or on Ctrl-C), stop the rest and wait for them.
status=0
wait -n "${pids[@]}" || status=$?
stop
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
exit "$status"
