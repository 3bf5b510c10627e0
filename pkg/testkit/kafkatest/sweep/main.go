// Command sweep deletes, from the broker in KAFKA_BROKERS, every topic and
// consumer group that a test or a benchmark named with its own prefix
// (kafkatest.TestPrefix, loadtest.Prefix) and left behind: a test killed
// before its clean-up, a clean-up that failed. make test runs it before
// the tests and after them, so a killed run costs the shared local broker
// nothing (partitions it kept used to add up to an OutOfMemoryError).
//
//	go run ./pkg/kafkatest/sweep
//
// It prints what it deleted and the topics and partitions left on the
// broker, and never touches a name without one of those prefixes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

func run() error {
	v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS"))
	if v == "" {
		return errors.New("KAFKA_BROKERS is not set")
	}
	brokers := strings.Split(v, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := kafkatest.Sweep(ctx, brokers)
	if err != nil {
		return err
	}
	cl, err := kafkaconf.Config{Brokers: brokers}.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	parts := 0
	for _, td := range tds {
		parts += len(td.Partitions)
	}
	fmt.Printf("sweep: deleted %d test topics (%d partitions) and %d groups left by earlier runs (%d groups left: members not yet timed out); the broker now has %d topics, %d partitions\n",
		d.Topics, d.Partitions, d.Groups, d.GroupsInUse, len(tds), parts)
	return nil
}
