package providers

import (
	"fmt"
	"io"
	"log/slog"
)

const redacted = "[redacted]"

// secret is key material read from the environment. Every way Go has of
// printing or serialising a value (fmt verbs, slog, JSON, text, YAML) shows
// "[redacted]" instead of the bytes.
type secret []byte

func (secret) String() string               { return redacted }
func (secret) GoString() string             { return redacted }
func (secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (secret) MarshalYAML() (any, error)    { return redacted, nil }
