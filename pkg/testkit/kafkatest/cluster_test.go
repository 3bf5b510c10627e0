package kafkatest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produce writes n records to topic with acks=all and returns the first
// error.
func produce(ctx context.Context, cl *kgo.Client, topic string, from, n int) error {
	var first error
	for i := from; i < from+n; i++ {
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		if err := r.FirstErr(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TestClusterKillAndRejoin: three nodes, replication factor 3 and
// min.insync.replicas 2 by default; with one node killed acks=all still
// succeeds, with two down it cannot; the killed node rejoins every ISR.
func TestClusterKillAndRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private three-broker Kafka")
	}
	// Beside TestSingleBrokerStopStart: each has its own nodes, ports and
	// directory, and mostly waits for JVMs to start and stop.
	t.Parallel()
	c := StartCluster(t, 3)
	if c.Size() != 3 || len(c.Brokers()) != 3 {
		t.Fatalf("size %d, brokers %v", c.Size(), c.Brokers())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := Client(t, c.Brokers(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second))
	adm := kadm.NewClient(cl)
	const topic = "rf3"
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td[topic].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v: want the broker default of 3", p.Partition, p.Replicas)
		}
	}
	// A broker that has not yet seen the new topic in its metadata answers
	// UNKNOWN_TOPIC_OR_PARTITION for it (the resource's own error, with no
	// configs): ask again until one knows it.
	var rc kadm.ResourceConfig
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if rc, err = rcs.On(topic, nil); err != nil {
			t.Fatal(err)
		}
		if rc.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("configs of %s: %v", topic, rc.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	minISR := ""
	for _, cfg := range rc.Configs {
		if cfg.Key == "min.insync.replicas" {
			minISR = cfg.MaybeValue()
		}
	}
	if minISR != "2" {
		t.Errorf("min.insync.replicas = %q, want 2", minISR)
	}
	if err := produce(ctx, cl, topic, 0, 100); err != nil {
		t.Fatalf("produce with three nodes: %v", err)
	}

	step := time.Now()
	lap := func(what string) {
		t.Logf("%s: %s", what, time.Since(step).Round(100*time.Millisecond))
		step = time.Now()
	}
	lap("topic and 100 records")
	c.Kill(2)
	lap("kill node 2")
	if err := produce(ctx, cl, topic, 100, 100); err != nil {
		t.Fatalf("produce, acks=all, one node of three killed: %v", err)
	}
	lap("100 records with node 2 killed")

	// Two of three down: no quorum and no ISR of 2, so nothing is
	// acknowledged (the records time out).
	c.Stop(3)
	lap("stop node 3")
	short, cancelShort := context.WithTimeout(ctx, 8*time.Second)
	err = produce(short, cl, topic, 200, 1)
	cancelShort()
	if err == nil {
		t.Errorf("produce with acks=all succeeded on one live node of three (min.insync.replicas 2)")
	} else {
		t.Logf("one node of three: produce failed as it must: %v", err)
	}

	lap("a produce that must fail")
	c.Start(2, 3)
	lap("start nodes 2 and 3 together")
	c.WaitInSync(90*time.Second, topic)
	lap("every replica in sync")
	if err := produce(ctx, cl, topic, 300, 100); err != nil {
		t.Fatalf("produce after the nodes came back: %v", err)
	}
	if got := EndOffsets(t, c.Brokers(), topic); got < 300 {
		t.Errorf("%d records written, want at least 300", got)
	}
}

// TestSingleBrokerStopStart: a private single broker stops (SIGTERM) and
// starts again with its data.
func TestSingleBrokerStopStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Kafka broker")
	}
	t.Parallel() // beside TestClusterKillAndRejoin
	c := StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := Client(t, c.Brokers(), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "one"); err != nil {
		t.Fatal(err)
	}
	if err := produce(ctx, cl, "one", 0, 10); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	if conn, err := net.DialTimeout("tcp", c.Brokers()[0], time.Second); err == nil {
		conn.Close()
		t.Errorf("%s accepts connections after Stop", c.Brokers()[0])
	}
	c.Start(1)
	if err := produce(ctx, cl, "one", 10, 10); err != nil {
		t.Fatal(err)
	}
	if got := EndOffsets(t, c.Brokers(), "one"); got != 20 {
		t.Errorf("%d records after a restart, want 20", got)
	}
}
