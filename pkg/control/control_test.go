package control

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

func TestSettingValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Setting
		want string
	}{
		{Setting{Provider: "stripe", Paused: true}, ""},
		{Setting{Provider: "stripe", Rate: 20}, ""},
		{Setting{Provider: "", Rate: 1}, "want a provider name"},
		{Setting{Provider: "a:b"}, "want a provider name"},
		{Setting{Provider: "stripe", Rate: -1}, "rate -1"},
	} {
		err := tc.s.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", tc.s, err, tc.want)
		}
	}
	if got := (Setting{Provider: "x", Rate: 2.5}).String(); got != "draining at 2.5/s" {
		t.Errorf("String = %q", got)
	}
}

// fakeControl starts a fake cluster holding topics (one partition each)
// for the test: it returns the maker of clients of it, one client, and a
// context ending after 10 s.
func fakeControl(t *testing.T, topics ...string) (func(...kgo.Opt) (*kgo.Client, error), *kgo.Client, context.Context) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	newClient := kafkatest.NewClient(c.ListenAddrs())
	cl, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return newClient, cl, ctx
}

// TestEndOffsetsWaitsForANewTopic: a broker that does not host a topic yet
// (a cluster's broker a moment after the topic was created; here, a topic
// created 300 ms after the first ask) answers UNKNOWN_TOPIC_OR_PARTITION,
// and endOffsets asks again instead of failing; a topic that never comes
// fails after its attempts, naming the error.
func TestEndOffsetsWaitsForANewTopic(t *testing.T) {
	_, cl, ctx := fakeControl(t, "webhooks.other")
	adm := kadm.NewClient(cl)
	created := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := adm.CreateTopic(ctx, 2, 1, nil, "webhooks.control")
		created <- err
	}()
	end, err := endOffsets(ctx, cl, "webhooks.control")
	if cerr := <-created; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || len(end) != 2 || end[0] != 0 || end[1] != 0 {
		t.Errorf("end offsets of a topic created 300 ms after the first ask: %v, %v; want partitions 0 and 1 at 0", end, err)
	}
	start := time.Now()
	_, err = endOffsets(ctx, cl, "webhooks.never")
	if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("end offsets of a topic never created: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("a topic never created failed after %s: want its attempts (about 3.5 s) first", el)
	}
}

func TestFollow(t *testing.T) {
	newClient, cl, ctx := fakeControl(t, "webhooks.control")
	if err := Write(ctx, cl, "webhooks.control", Setting{Provider: "slowcrm", Paused: true, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "webhooks.control", Key: []byte("provider:bad"), Value: []byte("{")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		got     = map[string]Setting{}
		bads    []error
		caught  = make(chan struct{})
		stopped = make(chan error, 1)
	)
	fctx, stop := context.WithCancel(ctx)
	go func() {
		stopped <- Follow(fctx, newClient, "webhooks.control",
			func(s Setting) { mu.Lock(); got[s.Provider] = s; mu.Unlock() },
			func() { close(caught) },
			func(err error) { mu.Lock(); bads = append(bads, err); mu.Unlock() })
	}()
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("Follow never caught up")
	}
	mu.Lock()
	if !got["slowcrm"].Paused || len(bads) != 1 {
		t.Fatalf("after catching up: settings %v, bad records %v; want slowcrm paused and one bad record", got, bads)
	}
	mu.Unlock()
	if err := Write(ctx, cl, "webhooks.control", Setting{Provider: "slowcrm", Rate: 5, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for {
		mu.Lock()
		s := got["slowcrm"]
		mu.Unlock()
		if !s.Paused && s.Rate == 5 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the new setting never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
