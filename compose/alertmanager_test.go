package compose

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// amConfig runs prometheus/alertmanager-config.sh with only env (and PATH)
// and returns the file it wrote, what it said, and its error.
func amConfig(t *testing.T, env ...string) (string, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "alertmanager.yml")
	cmd := exec.CommandContext(t.Context(), "sh", "prometheus/alertmanager-config.sh", out)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	said, err := cmd.CombinedOutput()
	if err != nil {
		return "", string(said), err
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v: want a file only its owner reads (it holds secrets)", out, err, st.Mode())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	amtool, lookErr := exec.LookPath("amtool")
	switch {
	case lookErr == nil:
		if b, err := exec.CommandContext(t.Context(), amtool, "check-config", out).CombinedOutput(); err != nil {
			t.Fatalf("amtool check-config: %v\n%s\n%s", err, b, raw)
		}
	case os.Getenv("CI") == "true":
		t.Fatal("amtool is not on PATH (CI installs Debian's prometheus-alertmanager package for it)")
	default:
		t.Log("amtool is not on PATH (Debian: apt-get install prometheus-alertmanager): the configuration is not checked by Alertmanager")
	}
	return string(raw), string(said), nil
}

// TestAlertmanagerConfig: the receivers make observe and the compose
// alertmanager configure from the environment: none says so, each one set
// is in the file Alertmanager accepts with resolutions sent, one set in
// part is refused naming what is missing, and a value cannot break the YAML.
func TestAlertmanagerConfig(t *testing.T) {
	all := []string{
		"HOOKLINE_ALERT_WEBHOOK_URL=http://127.0.0.1:1/hook?a=\"b\"\\c",
		"HOOKLINE_ALERT_SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T0/B0/secret-slack",
		"HOOKLINE_ALERT_SLACK_CHANNEL=#ops",
		"HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN=123456:secret-telegram",
		"HOOKLINE_ALERT_TELEGRAM_CHAT_ID=-1001234",
		"HOOKLINE_ALERT_EMAIL_TO=oncall@example.com",
		"HOOKLINE_ALERT_EMAIL_FROM=hookline@example.com",
		"HOOKLINE_ALERT_SMTP_HOST=smtp.example.com:587",
		"HOOKLINE_ALERT_SMTP_USERNAME=hookline",
		"HOOKLINE_ALERT_SMTP_PASSWORD=secret-smtp",
	}
	t.Run("none", func(t *testing.T) {
		cfg, said, err := amConfig(t)
		if err != nil {
			t.Fatalf("%v\n%s", err, said)
		}
		if !strings.Contains(said, "no receiver configured") || strings.Contains(cfg, "_configs:") {
			t.Errorf("said %q, wrote:\n%s\nwant no receiver, said so", said, cfg)
		}
	})
	t.Run("all", func(t *testing.T) {
		cfg, said, err := amConfig(t, all...)
		if err != nil {
			t.Fatalf("%v\n%s", err, said)
		}
		if !strings.Contains(said, "receivers: webhook slack telegram email") {
			t.Errorf("said %q", said)
		}
		for _, want := range []string{"webhook_configs:", "slack_configs:", "telegram_configs:", "email_configs:",
			"secret-slack", "secret-telegram", "secret-smtp", "chat_id: -1001234", `url: "http://127.0.0.1:1/hook?a=\"b\"\\c"`} {
			if !strings.Contains(cfg, want) {
				t.Errorf("no %q in:\n%s", want, cfg)
			}
		}
		if n := strings.Count(cfg, "send_resolved: true"); n != 4 {
			t.Errorf("%d receivers told of resolutions, want 4:\n%s", n, cfg)
		}
		if strings.Contains(said, "secret") {
			t.Errorf("it printed a secret: %q", said)
		}
	})
	for _, tc := range []struct {
		name    string
		env     []string
		missing string
	}{
		{"telegram without chat", []string{"HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN=1:x"}, "HOOKLINE_ALERT_TELEGRAM_CHAT_ID"},
		{"telegram chat not a number", []string{"HOOKLINE_ALERT_TELEGRAM_BOT_TOKEN=1:x", "HOOKLINE_ALERT_TELEGRAM_CHAT_ID=@ops"}, "HOOKLINE_ALERT_TELEGRAM_CHAT_ID"},
		{"email without host", []string{"HOOKLINE_ALERT_EMAIL_TO=a@example.com", "HOOKLINE_ALERT_EMAIL_FROM=b@example.com"}, "HOOKLINE_ALERT_SMTP_HOST"},
		{"smtp password without user", []string{"HOOKLINE_ALERT_EMAIL_TO=a@example.com", "HOOKLINE_ALERT_EMAIL_FROM=b@example.com",
			"HOOKLINE_ALERT_SMTP_HOST=h:25", "HOOKLINE_ALERT_SMTP_PASSWORD=p"}, "HOOKLINE_ALERT_SMTP_USERNAME"},
		{"a line break", []string{"HOOKLINE_ALERT_WEBHOOK_URL=http://x/\nroute: {}"}, "HOOKLINE_ALERT_WEBHOOK_URL"},
		{"bad duration", []string{"HOOKLINE_ALERT_GROUP_WAIT=soon"}, "HOOKLINE_ALERT_GROUP_WAIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, said, err := amConfig(t, tc.env...)
			if err == nil || !strings.Contains(said, tc.missing) {
				t.Errorf("err %v, said %q: want a refusal naming %s", err, said, tc.missing)
			}
		})
	}
}
