#!/usr/bin/env bash
# `make observe`: a real Prometheus and a real Alertmanager, from Debian's
# prometheus and prometheus-alertmanager packages (no Docker), and Jaeger
# (built from the module compose/jaeger pins, by compose/jaeger/install.sh:
# once, minutes when cold), in the foreground. Jaeger takes OTLP from the
# services (OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318) and keeps
# the traces in memory. Prometheus scrapes the services `make run` starts (on the
# addresses run.sh gives them, from the same variables), evaluates
# compose/prometheus/alerts.yml and sends what fires to Alertmanager, which
# notifies the receivers configured in the environment
# (compose/prometheus/alertmanager-config.sh lists their variables). Both
# configurations are written at start into a temporary folder (mode 0700),
# never into the repository, and removed at the end with the data, unless
# HOOKLINE_OBSERVE_DATA_DIR keeps the data. Once both answer, it prints
# their URLs. Ctrl-C or SIGTERM stops both.
#
# Settings (environment, with defaults):
#   HOOKLINE_OBSERVE_PROMETHEUS_ADDR=127.0.0.1:9090
#   HOOKLINE_OBSERVE_ALERTMANAGER_ADDR=127.0.0.1:9193 (not Alertmanager's 9093: the local broker's controller is there)
#   HOOKLINE_OBSERVE_SCRAPE_INTERVAL=15s  HOOKLINE_OBSERVE_SCRAPE_TIMEOUT=10s (at most the interval)
#   HOOKLINE_OBSERVE_EVAL_INTERVAL=15s
#   HOOKLINE_OBSERVE_RULES=compose/prometheus/alerts.yml
#   HOOKLINE_OBSERVE_DATA_DIR (unset: the temporary folder, removed at the end)
#   HOOKLINE_OBSERVE_READY_TIMEOUT=60 (seconds to wait for each to answer)
#   HOOKLINE_OBSERVE_JAEGER=on (off: no Jaeger)
#   HOOKLINE_OBSERVE_JAEGER_UI_ADDR=127.0.0.1:16686 (the query API: /api/traces/{id})
#   HOOKLINE_JAEGER_UI_ASSETS (unset: no Jaeger UI; an unpacked jaeger-ui release serves it)
#   HOOKLINE_OBSERVE_OTLP_HTTP_ADDR=127.0.0.1:4318  HOOKLINE_OBSERVE_OTLP_GRPC_ADDR=127.0.0.1:4317
#   HOOKLINE_OBSERVE_JAEGER_HEALTH_ADDR=127.0.0.1:13133  HOOKLINE_OBSERVE_JAEGER_QUERY_GRPC_ADDR=127.0.0.1:16685
# The scrape targets, as compose/run.sh sets them (the same defaults); a
# variable set to the empty string leaves its service out:
#   HOOKLINE_INGEST_ADDR=:8080  HOOKLINE_PROCESSOR_METRICS_ADDR=:9101
#   HOOKLINE_RETRIER_METRICS_ADDR=:9102  HOOKLINE_ADMIN_ADDR=127.0.0.1:8081 (dlq serve)
# The receivers: HOOKLINE_ALERT_* (compose/prometheus/alertmanager-config.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'observe: %s\n' "$*" >&2; }

: "${HOOKLINE_OBSERVE_PROMETHEUS_ADDR:=127.0.0.1:9090}"
: "${HOOKLINE_OBSERVE_ALERTMANAGER_ADDR:=127.0.0.1:9193}"
: "${HOOKLINE_OBSERVE_SCRAPE_INTERVAL:=15s}"
: "${HOOKLINE_OBSERVE_SCRAPE_TIMEOUT:=10s}"
: "${HOOKLINE_OBSERVE_EVAL_INTERVAL:=15s}"
: "${HOOKLINE_OBSERVE_RULES:=compose/prometheus/alerts.yml}"
: "${HOOKLINE_OBSERVE_READY_TIMEOUT:=60}"
: "${HOOKLINE_OBSERVE_JAEGER:=on}"
: "${HOOKLINE_OBSERVE_JAEGER_UI_ADDR:=127.0.0.1:16686}"
: "${HOOKLINE_OBSERVE_OTLP_HTTP_ADDR:=127.0.0.1:4318}"
: "${HOOKLINE_OBSERVE_OTLP_GRPC_ADDR:=127.0.0.1:4317}"
: "${HOOKLINE_OBSERVE_JAEGER_HEALTH_ADDR:=127.0.0.1:13133}"
: "${HOOKLINE_OBSERVE_JAEGER_QUERY_GRPC_ADDR:=127.0.0.1:16685}"
# Unset: run.sh's default; empty: not scraped.
ingest_addr=${HOOKLINE_INGEST_ADDR-:8080}
processor_addr=${HOOKLINE_PROCESSOR_METRICS_ADDR-:9101}
retrier_addr=${HOOKLINE_RETRIER_METRICS_ADDR-:9102}
dlq_addr=${HOOKLINE_ADMIN_ADDR-127.0.0.1:8081}

prometheus=$(command -v prometheus || true)
alertmanager=$(command -v alertmanager || command -v prometheus-alertmanager || true)
if [ -z "$prometheus" ] || [ -z "$alertmanager" ]; then
  say "prometheus and alertmanager must be on PATH: apt-get install prometheus prometheus-alertmanager (Debian, Ubuntu)"
  exit 1
fi
jaeger=""
case "$HOOKLINE_OBSERVE_JAEGER" in
  on) jaeger=$(compose/jaeger/install.sh) || { say "Jaeger could not be built (compose/jaeger/install.sh); HOOKLINE_OBSERVE_JAEGER=off runs without it"; exit 1; } ;;
  off) ;;
  *) say "HOOKLINE_OBSERVE_JAEGER=$HOOKLINE_OBSERVE_JAEGER: want on or off"; exit 1 ;;
esac
[ -r "$HOOKLINE_OBSERVE_RULES" ] || { say "HOOKLINE_OBSERVE_RULES=$HOOKLINE_OBSERVE_RULES: no such file"; exit 1; }
rules=$(cd "$(dirname "$HOOKLINE_OBSERVE_RULES")" && pwd)/$(basename "$HOOKLINE_OBSERVE_RULES")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hookline-observe.XXXXXX") # mode 0700
trap 'rm -rf "$tmp"' EXIT
data=${HOOKLINE_OBSERVE_DATA_DIR:-$tmp}
mkdir -p "$data/prometheus" "$data/alertmanager"

compose/prometheus/alertmanager-config.sh "$tmp/alertmanager.yml"

# The Prometheus configuration: compose/prometheus/prometheus.yml's jobs
# (the alert texts name them), on this machine's addresses.
host_of() { case "$1" in :*) echo "127.0.0.1$1" ;; *) echo "$1" ;; esac; }
targets=()
{
  cat <<EOF
# Written by compose/observe.sh.
global:
  scrape_interval: $HOOKLINE_OBSERVE_SCRAPE_INTERVAL
  scrape_timeout: $HOOKLINE_OBSERVE_SCRAPE_TIMEOUT
  evaluation_interval: $HOOKLINE_OBSERVE_EVAL_INTERVAL
rule_files:
  - "$rules"
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["$HOOKLINE_OBSERVE_ALERTMANAGER_ADDR"]
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["$HOOKLINE_OBSERVE_PROMETHEUS_ADDR"]
EOF
  for job in ingest:"$ingest_addr" processor:"$processor_addr" retrier:"$retrier_addr" dlq:"$dlq_addr"; do
    name=${job%%:*} addr=${job#*:}
    [ -n "$addr" ] || continue
    target=$(host_of "$addr")
    targets+=("hookline-$name $target")
    printf '  - job_name: hookline-%s\n    static_configs:\n      - targets: ["%s"]\n' "$name" "$target"
  done
} >"$tmp/prometheus.yml"
((${#targets[@]})) || say "no hookline service to scrape: every HOOKLINE_*_ADDR is empty"

# shellcheck source=procs.sh
. compose/procs.sh # the script runs from the repository root (cd above)

am_url="http://$HOOKLINE_OBSERVE_ALERTMANAGER_ADDR"
prom_url="http://$HOOKLINE_OBSERVE_PROMETHEUS_ADDR"
# --cluster.listen-address= : one Alertmanager, no gossip port (9094 by default).
start alertmanager "$alertmanager" --config.file="$tmp/alertmanager.yml" --storage.path="$data/alertmanager" \
  --web.listen-address="$HOOKLINE_OBSERVE_ALERTMANAGER_ADDR" --web.external-url="$am_url" \
  --cluster.listen-address= --log.level=warn
start prometheus "$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$data/prometheus" \
  --web.listen-address="$HOOKLINE_OBSERVE_PROMETHEUS_ADDR" --web.external-url="$prom_url" --log.level=warn

alive() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done; }
await() { # URL: 0 once it answers 2xx; 1 on Ctrl-C, a process gone or the deadline
  local deadline=$((SECONDS + HOOKLINE_OBSERVE_READY_TIMEOUT))
  until curl -sf -o /dev/null "$1"; do
    [ "$stopped" = 0 ] && alive || return 1
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$1 did not answer within ${HOOKLINE_OBSERVE_READY_TIMEOUT}s; see the logs above"
      return 1
    fi
    sleep 0.2
  done
}
jaeger_url="http://$HOOKLINE_OBSERVE_JAEGER_UI_ADDR"
if [ -n "$jaeger" ]; then
  # compose/jaeger/config.yaml reads its addresses from these.
  export HOOKLINE_JAEGER_UI_ADDR=$HOOKLINE_OBSERVE_JAEGER_UI_ADDR HOOKLINE_JAEGER_OTLP_HTTP_ADDR=$HOOKLINE_OBSERVE_OTLP_HTTP_ADDR \
    HOOKLINE_JAEGER_OTLP_GRPC_ADDR=$HOOKLINE_OBSERVE_OTLP_GRPC_ADDR HOOKLINE_JAEGER_HEALTH_ADDR=$HOOKLINE_OBSERVE_JAEGER_HEALTH_ADDR \
    HOOKLINE_JAEGER_QUERY_GRPC_ADDR=$HOOKLINE_OBSERVE_JAEGER_QUERY_GRPC_ADDR
  start jaeger "$jaeger" --config compose/jaeger/config.yaml
fi
jaeger_ready() { [ -z "$jaeger" ] || await "$jaeger_url/"; }
if await "$prom_url/-/ready" && await "$am_url/-/ready" && jaeger_ready; then
  {
    echo
    echo "observe: ready. Prometheus: $prom_url (firing and pending alerts: $prom_url/alerts; targets: $prom_url/targets)"
    echo "observe: Alertmanager: $am_url (notifications, silences)"
    if [ -n "$jaeger" ]; then
      # Jaeger built from its module serves a placeholder where the UI
      # would be (its assets are built apart): the trace link goes to the
      # query API's JSON of the trace, unless an unpacked jaeger-ui release
      # is given (HOOKLINE_JAEGER_UI_ASSETS, compose/jaeger/config.yaml).
      trace_url="$jaeger_url/api/traces/{trace_id}" ui="no UI: its build has no UI assets, the link is the trace's JSON"
      if [ -n "${HOOKLINE_JAEGER_UI_ASSETS:-}" ]; then
        trace_url="$jaeger_url/trace/{trace_id}" ui="the UI from $HOOKLINE_JAEGER_UI_ASSETS"
      fi
      echo "observe: Jaeger: $jaeger_url ($ui); OTLP on http://$HOOKLINE_OBSERVE_OTLP_HTTP_ADDR and grpc $HOOKLINE_OBSERVE_OTLP_GRPC_ADDR:"
      echo "observe:   OTEL_EXPORTER_OTLP_ENDPOINT=http://$HOOKLINE_OBSERVE_OTLP_HTTP_ADDR make run; HOOKLINE_TRACE_URL=$trace_url for dlq serve"
    fi
    for t in "${targets[@]}"; do echo "observe: scraping ${t% *} at ${t#* } every $HOOKLINE_OBSERVE_SCRAPE_INTERVAL"; done
    echo "observe: rules: $rules; Ctrl-C stops ${names[*]}."
    echo
  } >&2
elif [ "$stopped" = 0 ]; then
  status=1
  stop
fi

# When either exits (or on Ctrl-C), stop the other and wait for both.
if [ "$stopped" = 0 ]; then
  wait -n "${pids[@]}" || status=$?
  if [ "$signalled" = 1 ]; then
    status=0 # asked to stop: not a failure
  else
    say "${names[*]}: one exited by itself; stopping the other"
    [ "$status" != 0 ] || status=1
  fi
  stop
fi
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
say "stopped"
exit "$status"
