package e2e

// StartRetrier runs a retrier with its own metrics port (HOOKLINE_METRICS_ADDR)
// and waits until /healthz answers; extra is added to its environment. Run
// several for a group of retriers: they share the system's prefix, hence the
// group.
func (s *System) StartRetrier(extra map[string]string) *Service {
	s.tb.Helper()
	return s.startListening("retrier", "HOOKLINE_METRICS_ADDR", "/healthz", extra)
}
