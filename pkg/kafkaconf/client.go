package kafkaconf

import "github.com/twmb/franz-go/pkg/kgo"

// NewClient is kgo.NewClient over Opts(extra...): a client that reaches the
// cluster as this configuration says (TLS, SASL), the way tests, benchmarks
// and tools make theirs. It dials nothing until the first request.
func (c Config) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Opts(extra...)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(opts...)
}
