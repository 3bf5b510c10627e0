package kafkaconf

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Explain wraps a Kafka client error whose cause is this configuration (a
// wrong password, a CA that did not sign the broker's certificate, TLS or
// SASL missing on a listener that wants it) in a message that says so and
// names the setting to check. Other errors come back unchanged; nil stays
// nil. The password is never part of the message.
func (c Config) Explain(err error) error {
	if err == nil {
		return nil
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var firstEOF *kgo.ErrFirstReadEOF
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("SASL authentication failed for user %q (%s): check KAFKA_SASL_USER and KAFKA_SASL_PASSWORD: %w", c.SASLUser, c.SASLMechanism, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("the broker does not offer SASL mechanism %s (KAFKA_SASL_MECHANISM): %w", c.SASLMechanism, err)
	case errors.As(err, &unknownCA):
		ca := "the system's CAs only: KAFKA_TLS_CA_FILE is not set"
		if c.TLSCAFile != "" {
			ca = "KAFKA_TLS_CA_FILE=" + c.TLSCAFile + " does not hold the CA that signed it"
		}
		return fmt.Errorf("TLS: the broker's certificate is signed by an unknown authority (%s): %w", ca, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("TLS: the broker's certificate is not valid for the address in KAFKA_BROKERS: %w", err)
	case !c.TLS && (errors.As(err, &firstEOF) || errors.Is(err, syscall.ECONNRESET) ||
		// franz-go's guess when a TLS listener answers a plaintext request
		// with an alert: an untyped error, so its text is all there is.
		strings.Contains(err.Error(), "is this a plaintext connection speaking to a tls endpoint")):
		return fmt.Errorf("the broker closed the connection at the first request: a TLS listener (SSL or SASL_SSL) does that to a plaintext client, and KAFKA_TLS is not true: %w", err)
	case c.SASLMechanism == "" && errors.As(err, &firstEOF):
		return fmt.Errorf("the broker closed the connection at the first request: a SASL listener does that to a client without SASL, and KAFKA_SASL_MECHANISM is not set: %w", err)
	}
	return err
}
