package signature

import "fmt"

// Reasons a signature is refused, carried in Error.Reason.
const (
	ReasonMissing   = "missing"   // a header the scheme needs is absent or empty
	ReasonMalformed = "malformed" // a header is present but cannot be parsed
	ReasonMismatch  = "mismatch"  // no signature matches any configured secret
	ReasonStale     = "stale"     // authentic, but the timestamp is outside the tolerance
)

// Error reports a request whose signature does not verify; ingest
// answers 401. Reason is one of the Reason constants. The message names
// headers, never a secret or a signature value.
type Error struct {
	Reason string
	Msg    string
}

// Error renders "signature <reason>: <message>". It holds no secret.
func (e *Error) Error() string { return "signature " + e.Reason + ": " + e.Msg }

func sigErr(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}
