package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestRunClose: Close deletes the topics of the run's prefixes and its
// folder; after a failed run it keeps the folder and says where.
func TestRunClose(t *testing.T) {
	if os.Getenv("KAFKA_BROKERS") == "" {
		t.Skip("KAFKA_BROKERS is not set: Close deletes topics on a real broker (make test sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, failed := range []bool{false, true} {
		r, err := NewRun("loadtest-run", nil)
		if err != nil {
			t.Fatal(err)
		}
		topic := r.Prefix("t-loadtest-run") + "x"
		if _, err := r.Admin.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		var runErr error
		if failed {
			runErr = errors.New("the run failed")
		}
		err = r.Close(runErr)
		_, statErr := os.Stat(r.Dir)
		switch {
		case !failed && (err != nil || !os.IsNotExist(statErr)):
			t.Errorf("clean run: Close = %v, folder %v; want nil and the folder gone", err, statErr)
		case failed && (!errors.Is(err, runErr) || !strings.Contains(fmt.Sprint(err), r.Dir) || statErr != nil):
			t.Errorf("failed run: Close = %v, folder %v; want the run's error naming the folder, kept", err, statErr)
		}
		os.RemoveAll(r.Dir)
		if exists(ctx, t, topic) {
			t.Errorf("topic %s still there after Close", topic)
		}
	}
}

// exists asks a new client whether topic is there, for up to 10 s while it
// is (the broker's metadata may lag its deletion).
func exists(ctx context.Context, t *testing.T, topic string) bool {
	cfg, err := KafkaConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if td, ok := tds[topic]; !ok || td.Err != nil || time.Now().After(deadline) {
			return ok && td.Err == nil
		}
	}
}
