package providers

import (
	"fmt"
	"strings"
)

// MalformedError reports a request whose body or headers do not give an
// idempotency key (or a batch that cannot be split); ingest answers 400.
type MalformedError struct {
	Msg string
}

// Error renders "malformed request: <message>".
func (e *MalformedError) Error() string { return "malformed request: " + e.Msg }

func malformed(format string, args ...any) *MalformedError {
	return &MalformedError{Msg: fmt.Sprintf(format, args...)}
}

// ContentTypeError reports a Content-Type the provider does not send; ingest
// answers 415. Got is the header as received, Want the accepted media types.
type ContentTypeError struct {
	Got  string
	Want []string
}

// Error names the content type received and the ones accepted.
func (e *ContentTypeError) Error() string {
	return fmt.Sprintf("unsupported content type %q: want %s", e.Got, strings.Join(e.Want, " or "))
}
