package consume

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reportWriter writes this processor's reports on the control topic: the
// breaker reports (breakers.go) and the held reports (held.go).
type reportWriter interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

var _ reportWriter = (*kgo.Client)(nil)

// newReportWriter builds the one producer of the control topic's reports,
// shared by the breaker and the held reports: every replica acknowledges,
// nothing lingers, a report not delivered in 10 s fails (and is written
// again at the next look). Nil, with nothing to close, when no report is
// written: none needed (no destination with a breaker, no ordered route),
// no instance id or no client factory; and when the client cannot be
// built (logged: dlq serve and dlq status then see no reports of this
// instance).
func (p *setup) newReportWriter(needed bool) (reportWriter, func()) {
	if !needed || p.cfg.InstanceID == "" || p.cfg.NewClient == nil {
		return nil, func() {}
	}
	cl, err := p.cfg.NewClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		p.cfg.Logger.Warn("control reports: no client; dlq serve will not see breaker changes nor dlq status held entities", "err", err)
		return nil, func() {}
	}
	return cl, cl.Close
}
