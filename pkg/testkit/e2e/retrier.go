package e2e

import "time"

// StartRetrier runs a retrier with its own metrics port (HOOKLINE_METRICS_ADDR)
// and waits until /healthz answers; extra is added to its environment. Run
// several for a group of retriers: they share the system's prefix, hence the
// group.
func (s *System) StartRetrier(extra map[string]string) *Service {
	s.tb.Helper()
	addr := FreeAddr(s.tb)
	env := map[string]string{"HOOKLINE_METRICS_ADDR": addr}
	for k, v := range extra {
		env[k] = v
	}
	svc := s.start("retrier", addr, env)
	WaitHTTP(s.tb, "http://"+addr+"/healthz", 60*time.Second)
	return svc
}
