package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/testkit/proctest"
	"github.com/hookline/hookline/pkg/topics"
)

// Run is what every benchmark sets up first and undoes last: the cluster
// (KafkaConfig) and a client of it, the service binaries it starts
// (proctest.BinaryPath), a temporary folder for its files and the
// services' logs, and the topic prefixes whose topics and groups Close
// deletes.
type Run struct {
	Kafka  kafkaconf.Config
	Client *kgo.Client
	Admin  *kadm.Client
	// Dir is the temporary folder; Bins maps a service to its binary.
	Dir      string
	Bins     map[string]string
	prefixes []string
}

// NewRun sets a run up: KafkaConfig, a client with opts (through kafkaconf),
// the binaries of services, and a temporary folder named after name. It
// dials nothing yet.
func NewRun(name string, services []string, opts ...kgo.Opt) (*Run, error) {
	cfg, err := KafkaConfig()
	if err != nil {
		return nil, err
	}
	r := &Run{Kafka: cfg, Bins: map[string]string{}}
	for _, s := range services {
		if r.Bins[s], err = proctest.BinaryPath(s); err != nil {
			return nil, err
		}
	}
	if r.Client, err = cfg.NewClient(opts...); err != nil {
		return nil, err
	}
	r.Admin = kadm.NewClient(r.Client)
	if r.Dir, err = os.MkdirTemp("", "hookline-"+name+"-"); err != nil {
		r.Client.Close()
		return nil, err
	}
	return r, nil
}

// Prefix is a new topic and group prefix (the package's Prefix) whose
// topics and groups Close deletes.
func (r *Run) Prefix(name string) string {
	p := Prefix(name)
	r.prefixes = append(r.prefixes, p)
	return p
}

// Close undoes the run after runErr, the run's own result, and returns both
// joined: it deletes the topics and groups of every prefix (at most a
// minute), closes the client, and removes Dir, unless runErr is not nil:
// then Dir stays, with the services' logs, and the error says where. Stop
// the services first.
func (r *Run) Close(runErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, p := range r.prefixes {
		if err := topics.DeletePrefix(ctx, r.Admin, p); err != nil {
			errs = append(errs, r.Kafka.Explain(err))
		}
	}
	r.Client.Close()
	if runErr != nil {
		errs = append(errs, fmt.Errorf("files and logs of the run kept in %s", r.Dir))
	} else if err := os.RemoveAll(r.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append([]error{runErr}, errs...)...)
}
