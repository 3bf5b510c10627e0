package kafkaconf

import (
	"errors"
	"fmt"
	"strings"
)

// JavaProperties is this configuration as the client properties of
// Kafka's own Java tools (a --command-config file for ProducerPerformance,
// which the benchmarks run as their baseline): security.protocol, the
// truststore (KAFKA_TLS_CA_FILE, PEM) and sasl.mechanism with its JAAS
// login. It holds the password: write it to a file only its owner reads.
// The brokers are not in it (the tools take --bootstrap-server). An empty
// string for a plaintext cluster without SASL; an error for
// KAFKA_TLS_INSECURE, which the Java client cannot honour.
func (c Config) JavaProperties() (string, error) {
	if c.TLSInsecure {
		return "", errors.New("KAFKA_TLS_INSECURE: Kafka's Java tools cannot skip certificate verification; set KAFKA_TLS_CA_FILE instead")
	}
	var protocol string
	switch sasl := c.SASLMechanism != ""; {
	case c.TLS && sasl:
		protocol = "SASL_SSL"
	case c.TLS:
		protocol = "SSL"
	case sasl:
		protocol = "SASL_PLAINTEXT"
	default:
		return "", nil
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, escapeProperty(v)) }
	line("security.protocol", protocol)
	if c.TLSCAFile != "" {
		line("ssl.truststore.type", "PEM")
		line("ssl.truststore.location", c.TLSCAFile)
	}
	if c.SASLMechanism != "" {
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		if c.SASLMechanism == "PLAIN" {
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		}
		line("sasl.mechanism", c.SASLMechanism)
		line("sasl.jaas.config", fmt.Sprintf("%s required username=%s password=%s;", module, jaasQuote(c.SASLUser), jaasQuote(c.SASLPassword)))
	}
	return b.String(), nil
}

// jaasQuote is s as a quoted JAAS option value.
func jaasQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// escapeProperty is v as the value of a .properties line.
func escapeProperty(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(v)
}
