package signature

import (
	"fmt"
	"io"
	"log/slog"
)

const redacted = "[redacted]"

// Secret is key material read from the environment. Every way Go has of
// printing or serialising a value (fmt verbs, slog, JSON, text, YAML) shows
// "[redacted]" instead of the bytes.
type Secret []byte

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) MarshalYAML() (any, error)    { return redacted, nil }
