package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/hanging"
)

// How often the processor looks for its hanging transactions, and how long
// a partition's open transaction must have been idle to count as one.
const (
	hangingInterval = 10 * time.Second
	hangingMinAge   = 10 * time.Second
)

// watchHanging completes, until ctx ends, the transactions of this
// processor that its coordinator finished but whose markers never reached
// some partition (see package hanging). Without it, one broker stopped
// under load could leave the group unable to read a raw partition again.
// A hang whose outcome cannot be read fails the "transactions" readiness
// check until an operator ends it.
func (p *Processor) watchHanging(ctx context.Context, cl *kgo.Client) {
	adm := kadm.NewClient(cl)
	cfg := hanging.Config{
		TransactionalID: p.cfg.TransactionalID,
		Topics:          append([]string{p.cfg.Names.Changelog, p.cfg.Names.Outcomes, p.cfg.Names.DLQ}, p.cfg.Names.Retry...),
		MinAge:          hangingMinAge,
		NewClient:       p.cfg.NewClient,
		Now:             p.cfg.Now,
	}
	log := p.cfg.Logger
	t := time.NewTicker(hangingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		repairs, err := hanging.Check(ctx, adm, cfg)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("hanging transaction check failed; trying again later", "err", err)
			}
			continue
		}
		var undecided []string
		for _, r := range repairs {
			switch {
			case !r.Decided:
				p.m.hanging.WithLabelValues("undecided").Inc()
				undecided = append(undecided, r.String())
				log.Error("hanging transaction: the coordinator finished it but its marker never reached this partition, and its decision is no longer in __transaction_state; end it by hand (kafka-transactions.sh describe-producers, then abort or a commit marker)",
					"topic", r.Topic, "partition", r.Partition, "producer_id", r.ProducerID, "epoch", r.Epoch, "start_offset", r.StartOffset)
			case r.Err != nil:
				p.m.hanging.WithLabelValues("failed").Inc()
				log.Warn("hanging transaction: writing its marker failed; trying again", "repair", r.String(), "err", r.Err)
			default:
				action := map[bool]string{true: "commit", false: "abort"}[r.Commit]
				p.m.hanging.WithLabelValues(action).Inc()
				log.Warn("hanging transaction completed: its coordinator had finished it but the marker never reached this partition (lost in a broker shutdown); wrote the coordinator's decision",
					"topic", r.Topic, "partition", r.Partition, "producer_id", r.ProducerID, "epoch", r.Epoch, "start_offset", r.StartOffset, "marker", action)
			}
		}
		if len(undecided) > 0 {
			p.cfg.Health.Set("transactions", errors.New(fmt.Sprint("hanging transactions need an operator: ", undecided)))
		} else {
			p.cfg.Health.Set("transactions", nil)
		}
	}
}
