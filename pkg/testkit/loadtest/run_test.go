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
		// CreateTopics answers once the controller has the topic; the
		// broker's metadata, which Close lists, may show it a moment later.
		if !waitTopic(ctx, t, topic, true) {
			t.Fatalf("topic %s created but not listed after 10 s", topic)
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
		if waitTopic(ctx, t, topic, false) {
			t.Errorf("topic %s still there after Close", topic)
		}
	}
}

// waitTopic asks a new client whether topic is listed, for up to 10 s
// until the answer is want (the broker's metadata may lag a creation or a
// deletion), and returns the last answer.
func waitTopic(ctx context.Context, t *testing.T, topic string, want bool) bool {
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
		cl.PurgeTopicsFromClient(topic)
		tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		td, ok := tds[topic]
		if listed := ok && td.Err == nil; listed == want || time.Now().After(deadline) {
			return listed
		}
	}
}
