package api

// Error codes of the JSON error answer {"error": code, "message": ...}
// (DESIGN §4). Clients branch on the code; the message is for people.
const (
	CodeMalformed        = "malformed_body"
	CodeBadSignature     = "bad_signature"
	CodeUnknownProvider  = "unknown_provider"
	CodeNotFound         = "not_found"
	CodeMethod           = "method_not_allowed"
	CodeTooLarge         = "body_too_large"
	CodeContentType      = "unsupported_content_type"
	CodeRateLimited      = "rate_limited"
	CodeKafkaUnavailable = "kafka_unavailable"
	CodeInternal         = "internal_error"
	CodeBodyRead         = "body_read_failed"
	// CodeInvalidPayload is 422: the body fails its provider's schema and
	// the providers file says on_invalid: reject.
	CodeInvalidPayload = "invalid_payload"
	// CodeSelftestFailed is GET /selftest's 503: a check failed.
	CodeSelftestFailed = "selftest_failed"
)

// apiError is an answer that is not a 2xx. retryAfter, when positive, is sent
// as Retry-After in whole seconds.
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter int
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// errorBody is the JSON shape of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}
