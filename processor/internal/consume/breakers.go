package consume

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// breakerPoll is how often the breakers are looked at for a change.
const breakerPoll = time.Second

// publishBreakers reports each destination's circuit breaker on the
// control topic (control.Breaker, key breaker:<provider>:<instance>) until
// ctx ends: every destination closed at the start (which also clears what
// an earlier run of this instance left), then each change seen within
// breakerPoll, and an open breaker again every control.BreakerRefresh.
// `dlq serve` re-drives a provider's DLQ entries only while none is open.
// A report that cannot be written is logged and tried again at the next
// poll; nothing else waits for it.
func (p *Processor) publishBreakers(ctx context.Context) {
	open := map[string]func() bool{}
	for _, name := range p.cfg.Providers.Names() {
		h, ok := p.cfg.Router.For(name)
		if !ok {
			continue
		}
		if b, ok := h.(deliver.Breaker); ok {
			open[name] = b.BreakerOpen
		}
	}
	if len(open) == 0 || p.cfg.InstanceID == "" || p.cfg.NewClient == nil {
		return
	}
	names := make([]string, 0, len(open))
	for n := range open {
		names = append(names, n)
	}
	sort.Strings(names)
	cl, err := p.cfg.NewClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		p.cfg.Logger.Warn("breaker reports: no client; dlq serve will not see breaker changes", "err", err)
		return
	}
	defer cl.Close()
	sent := map[string]control.Breaker{} // the last report written per provider
	t := time.NewTicker(breakerPoll)
	defer t.Stop()
	for {
		now := p.cfg.Now()
		for _, name := range names {
			is := open[name]()
			last, ok := sent[name]
			if ok && last.Open == is && (!is || now.Sub(last.At) < control.BreakerRefresh) {
				continue
			}
			b := control.Breaker{Provider: name, Instance: p.cfg.InstanceID, Open: is, At: now.UTC()}
			r, err := control.BreakerRecord(p.cfg.Names.Control, b)
			if err == nil {
				err = cl.ProduceSync(ctx, r).FirstErr()
			}
			if err != nil {
				if ctx.Err() == nil {
					p.cfg.Logger.Warn("breaker report not written; trying again", "provider", name, "open", is, "err", err)
				}
				continue
			}
			sent[name] = b
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
