package providers

import (
	"fmt"
	"strings"
)

// Reasons a signature is refused, carried in SignatureError.Reason.
const (
	ReasonMissing   = "missing"   // a header the scheme needs is absent or empty
	ReasonMalformed = "malformed" // a header is present but cannot be parsed
	ReasonMismatch  = "mismatch"  // no signature matches any configured secret
	ReasonStale     = "stale"     // authentic, but the timestamp is outside the tolerance
)

// SignatureError reports a request whose signature does not verify; ingest
// answers 401. Reason is one of the Reason constants. The message names
// headers, never a secret or a signature value.
type SignatureError struct {
	Reason string
	Msg    string
}

// Error renders "signature <reason>: <message>". It holds no secret.
func (e *SignatureError) Error() string { return "signature " + e.Reason + ": " + e.Msg }

func sigErr(reason, format string, args ...any) *SignatureError {
	return &SignatureError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

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
