package consume

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// keepMovedLanes keeps, of the route default's lanes of the providers
// with routes but none named default (routing.moved), those that exist:
// a provider whose destination moved to routes has its old lane, where
// records may wait; one that had routes from the start has none, and
// nothing to read. It asks the cluster until it answers or ctx ends.
func (p *setup) keepMovedLanes(ctx context.Context) error {
	if len(p.routes.moved) == 0 {
		return nil
	}
	cl, err := p.cfg.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	moved := make([]string, 0, len(p.routes.moved))
	for t := range p.routes.moved {
		moved = append(moved, t)
	}
	for backoff := 500 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		tds, err := kadm.NewClient(cl).ListTopics(ctx, moved...)
		if err == nil {
			p.laneNames = slices.DeleteFunc(p.laneNames, func(t string) bool {
				_, isMoved := p.routes.moved[t]
				return isMoved && !tds.Has(t)
			})
			for _, t := range moved {
				if tds.Has(t) {
					p.cfg.Logger.Info("reading the route default's lane of a provider with routes but none named default: what waits there goes to its routes",
						"provider", p.routes.moved[t], "topic", t)
				}
			}
			return nil
		}
		p.cfg.Logger.Warn("listing the route default's lanes of the providers without one; trying again", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}
