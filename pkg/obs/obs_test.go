package obs

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/envconf"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(w.Body)
	return w.Code, string(b)
}

func TestReadiness(t *testing.T) {
	h := NewHealth("kafka", "restore")
	mux := Mux(h, NewRegistry())
	if code, body := get(t, mux, "/readyz"); code != 503 || !strings.Contains(body, "kafka") {
		t.Fatalf("pending checks: %d %s", code, body)
	}
	h.Set("kafka", nil)
	h.Set("restore", errors.New("partition 3 restoring"))
	if code, body := get(t, mux, "/readyz"); code != 503 || !strings.Contains(body, "partition 3 restoring") {
		t.Fatalf("failing check: %d %s", code, body)
	}
	h.Set("restore", nil)
	if code, _ := get(t, mux, "/readyz"); code != 200 {
		t.Fatalf("all checks pass: %d", code)
	}
	h.Drain()
	if code, body := get(t, mux, "/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("draining: %d %s", code, body)
	}
	if code, _ := get(t, mux, "/healthz"); code != 200 {
		t.Fatalf("healthz while draining: %d", code)
	}
	if code, body := get(t, mux, "/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics: %d", code)
	}
}

func TestNewLogger(t *testing.T) {
	for v, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		r := envconf.New(func(string) (string, bool) { return v, true })
		if got := ReadLogLevel(r); got != want || r.Err() != nil {
			t.Errorf("HOOKLINE_LOG_LEVEL=%q: %v, %v; want %v", v, got, r.Err(), want)
		}
	}
	r := envconf.New(func(string) (string, bool) { return "loud", true })
	if ReadLogLevel(r); r.Err() == nil || !strings.Contains(r.Err().Error(), "HOOKLINE_LOG_LEVEL") {
		t.Fatalf("bad level: %v", r.Err())
	}
	var b strings.Builder
	l := NewLogger(&b, slog.LevelWarn, "ingest")
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"service":"ingest"`) {
		t.Fatalf("log output %q", b.String())
	}
}

func TestKafkaLogger(t *testing.T) {
	for _, c := range []struct {
		level     slog.Level
		wantLevel kgo.LogLevel
		want      []string // lines written, as "LEVEL msg"
	}{
		{slog.LevelInfo, kgo.LogLevelWarn, []string{"ERROR e", "WARN w"}},
		{slog.LevelDebug, kgo.LogLevelInfo, []string{"ERROR e", "WARN w", "DEBUG i"}},
	} {
		var b strings.Builder
		l := NewLogger(&b, c.level, "processor")
		kl := KafkaLogger(l)
		if kl.Level() != c.wantLevel {
			t.Errorf("%s: Level() = %v, want %v", c.level, kl.Level(), c.wantLevel)
		}
		kl.Log(kgo.LogLevelError, "e", "broker", "1")
		kl.Log(kgo.LogLevelWarn, "w")
		kl.Log(kgo.LogLevelInfo, "i")
		kl.Log(kgo.LogLevelDebug, "d")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var rec struct{ Level, Msg, Source, Service string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: %q: %v", c.level, line, err)
			}
			if rec.Source != "kafka_client" || rec.Service != "processor" {
				t.Errorf("%s: line %q not tagged source=kafka_client, service=processor", c.level, line)
			}
			got = append(got, rec.Level+" "+rec.Msg)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: wrote %q, want %q", c.level, got, c.want)
		}
	}
}
