#!/bin/sh
# Writes an Alertmanager configuration to FILE from the environment: the
# receivers hookline's alerts go to. `make observe` (compose/observe.sh)
# runs it into a temporary folder at every start, and so does the
# docker-compose alertmanager service inside its container (hence POSIX sh:
# the prom/alertmanager image has busybox, no bash). The secrets live only
# in the environment and in FILE (mode 0600); never write FILE into the
# repository.
#
#   compose/prometheus/alertmanager-config.sh FILE
#
# A receiver is configured when its variables are set; one left unset is
# left out, one set in part is an error naming what is missing. With none,
# alerts show on Alertmanager's page only and the last line says so.
#
#   webhook   HOOKLINE_ALERT_WEBHOOK_URL (Alertmanager's JSON, version 4, is POSTed there)
#   slack     HOOKLINE_ALERT_SLACK_WEBHOOK_URL [HOOKLINE_ALERT_SLACK_CHANNEL]
#   telegram  HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN HOOKLINE_ALERT_TELEGRAM_CHAT_ID (a number; groups' are negative)
#   email     HOOKLINE_ALERT_EMAIL_TO HOOKLINE_ALERT_EMAIL_FROM HOOKLINE_ALERT_SMTP_HOST (host:port)
#             [HOOKLINE_ALERT_SMTP_USERNAME HOOKLINE_ALERT_SMTP_PASSWORD]
#             [HOOKLINE_ALERT_SMTP_REQUIRE_TLS=true]
#
# Timing (Alertmanager's route): HOOKLINE_ALERT_GROUP_WAIT=30s
# HOOKLINE_ALERT_GROUP_INTERVAL=5m HOOKLINE_ALERT_REPEAT_INTERVAL=4h.
# Every receiver is also told when an alert resolves.
set -eu

say() { printf 'alertmanager-config: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

[ $# -eq 1 ] || die "usage: $0 FILE"
out=$1

nl='
'
# q VALUE: VALUE as a YAML double-quoted string (JSON escaping; line breaks
# are refused below, before any is quoted).
q() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
cr=$(printf '\r')
for v in WEBHOOK_URL SLACK_WEBHOOK_URL SLACK_CHANNEL TELEGRAM_BOT_TOKEN TELEGRAM_CHAT_ID EMAIL_TO EMAIL_FROM \
	SMTP_HOST SMTP_USERNAME SMTP_PASSWORD; do
	eval "val=\${HOOKLINE_ALERT_$v:-}"
	case $val in *"$nl"* | *"$cr"*) die "HOOKLINE_ALERT_$v holds a line break" ;; esac
done

# need RECEIVER VAR...: 0 when every VAR is set, 1 when none is; an error
# naming the missing ones when only some are.
need() {
	r=$1
	shift
	set_n=0 missing=""
	for v in "$@"; do
		eval "val=\${$v:-}"
		if [ -n "$val" ]; then set_n=$((set_n + 1)); else missing="$missing $v"; fi
	done
	[ "$set_n" -eq $# ] && return 0
	[ "$set_n" -eq 0 ] && return 1
	die "$r receiver: set$missing too, or unset the rest of its variables"
}

duration() { # VAR DEFAULT: the variable's value, checked to be a duration
	eval "d=\${$1:-$2}"
	printf '%s' "$d" | grep -Eq '^([0-9]+(ms|s|m|h|d))+$' || die "$1=$d: want a duration such as 30s or 5m"
	printf '%s' "$d"
}

group_wait=$(duration HOOKLINE_ALERT_GROUP_WAIT 30s)
group_interval=$(duration HOOKLINE_ALERT_GROUP_INTERVAL 5m)
repeat_interval=$(duration HOOKLINE_ALERT_REPEAT_INTERVAL 4h)

receivers=""
body=""
if need webhook HOOKLINE_ALERT_WEBHOOK_URL; then
	receivers="$receivers webhook"
	body="$body
    webhook_configs:
      - url: $(q "$HOOKLINE_ALERT_WEBHOOK_URL")
        send_resolved: true"
fi
if need slack HOOKLINE_ALERT_SLACK_WEBHOOK_URL; then
	receivers="$receivers slack"
	channel=""
	[ -z "${HOOKLINE_ALERT_SLACK_CHANNEL:-}" ] || channel="
        channel: $(q "$HOOKLINE_ALERT_SLACK_CHANNEL")"
	# Slack's default text is empty: say what fired, what to do and where the runbook is.
	body="$body
    slack_configs:
      - api_url: $(q "$HOOKLINE_ALERT_SLACK_WEBHOOK_URL")$channel
        send_resolved: true
        title: '[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}'
        text: |-
          {{ range .Alerts }}*{{ .Annotations.summary }}* ({{ .Labels.severity }}{{ if .Labels.instance }}, {{ .Labels.instance }}{{ end }})
          {{ .Annotations.description }}
          Runbook: {{ .Annotations.runbook_url }}
          {{ end }}"
fi
if need telegram HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN HOOKLINE_ALERT_TELEGRAM_CHAT_ID; then
	printf '%s' "$HOOKLINE_ALERT_TELEGRAM_CHAT_ID" | grep -Eq '^-?[0-9]+$' ||
		die "HOOKLINE_ALERT_TELEGRAM_CHAT_ID=$HOOKLINE_ALERT_TELEGRAM_CHAT_ID: want the chat's numeric id"
	receivers="$receivers telegram"
	# Telegram's default message lists each alert's labels and annotations,
	# runbook_url included.
	body="$body
    telegram_configs:
      - bot_token: $(q "$HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN")
        chat_id: $HOOKLINE_ALERT_TELEGRAM_CHAT_ID
        send_resolved: true"
fi
if need email HOOKLINE_ALERT_EMAIL_TO HOOKLINE_ALERT_EMAIL_FROM HOOKLINE_ALERT_SMTP_HOST; then
	case ${HOOKLINE_ALERT_SMTP_REQUIRE_TLS:-true} in
	true | false) tls=${HOOKLINE_ALERT_SMTP_REQUIRE_TLS:-true} ;;
	*) die "HOOKLINE_ALERT_SMTP_REQUIRE_TLS=$HOOKLINE_ALERT_SMTP_REQUIRE_TLS: want true or false" ;;
	esac
	auth=""
	if need "email (SMTP login)" HOOKLINE_ALERT_SMTP_USERNAME HOOKLINE_ALERT_SMTP_PASSWORD; then
		auth="
        auth_username: $(q "$HOOKLINE_ALERT_SMTP_USERNAME")
        auth_password: $(q "$HOOKLINE_ALERT_SMTP_PASSWORD")"
	fi
	receivers="$receivers email"
	body="$body
    email_configs:
      - to: $(q "$HOOKLINE_ALERT_EMAIL_TO")
        from: $(q "$HOOKLINE_ALERT_EMAIL_FROM")
        smarthost: $(q "$HOOKLINE_ALERT_SMTP_HOST")
        require_tls: $tls$auth
        send_resolved: true"
fi

umask 077
cat >"$out" <<EOF
# Written by compose/prometheus/alertmanager-config.sh from the environment
# (receivers:${receivers:- none}). Holds secrets: do not copy it anywhere.
route:
  receiver: hookline
  group_by: [alertname, job, instance, provider, route]
  group_wait: $group_wait
  group_interval: $group_interval
  repeat_interval: $repeat_interval
receivers:
  - name: hookline$body
EOF

if [ -n "$receivers" ]; then
	say "receivers:$receivers"
else
	say "no receiver configured: alerts show on Alertmanager's page only and nobody is told." \
		"Set HOOKLINE_ALERT_WEBHOOK_URL, HOOKLINE_ALERT_SLACK_WEBHOOK_URL, HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN and _CHAT_ID," \
		"or HOOKLINE_ALERT_EMAIL_TO, _EMAIL_FROM and HOOKLINE_ALERT_SMTP_HOST (see docs/operating.md, Monitoring)."
fi
