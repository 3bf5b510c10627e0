package e2e_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestAutoPauseOfAGoneReceiver: github's route "main" has
// auto_pause_after: 5s and its receiver answers every call 503. Once every
// call has failed for 5 s the processor pauses the route on the control
// topic (by auto-pause, with why); dlq route list shows it, the
// HooklineRouteAutoPaused alert reaches a real Alertmanager receiver, and
// the deliveries still coming wait in the route's lane. With the receiver
// back, dlq route resume drains them: every delivery done once (lost 0,
// doubled 0); stripe is never paused.
func TestAutoPauseOfAGoneReceiver(t *testing.T) {
	skipShort(t)
	requireObserveTools(t)
	const alert = "HooklineRouteAutoPaused"
	rules, runbook := rulesWithFor(t, alert, "1s")
	recv := newAlertReceiver(t)

	sys := e2e.New(t, e2e.Options{Partitions: 4, Routes: map[string][]e2e.Route{
		"github": {{Name: "main", AutoPauseAfter: 5 * time.Second}},
	}})
	var down atomic.Bool
	calls := &callLog{at: map[string][]time.Time{}}
	sys.Dest.OnCall(calls.called)
	sys.Dest.BehaveRoute(func(route, _ string, _ int) int {
		if route == "main" && down.Load() {
			return 503
		}
		return 200
	})
	sys.StartIngest()
	sys.StartRetrier(nil)
	// A short breaker cool-down: after the resume, the open breaker's next
	// probe (not the pause) decides when the lane drains.
	proc := sys.StartProcessor("p1", map[string]string{"HOOKLINE_BREAKER_COOLDOWN": "2s"})
	obs := startObserve(t, map[string]string{"HOOKLINE_PROCESSOR_METRICS_ADDR": proc.Addr}, fastObserve(rules, recv))
	both := []string{"stripe", "github"}

	down.Store(true)
	wentDown := time.Now()
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 400, Rate: 40, Providers: both, ID: "down"})
	firing := recv.await(t, time.Minute, "a firing "+alert+" for github/main", obs, func(n amNotification, a amAlert) bool {
		return n.Status == "firing" && a.Status == "firing" && a.Labels["alertname"] == alert &&
			a.Labels["provider"] == "github" && a.Labels["route"] == "main"
	})
	pausedSeen := time.Now()
	t.Logf("%.1fs after the receiver went down: the receiver was told %s fires: labels %v", time.Since(wentDown).Seconds(), alert, firing.Labels)
	if firing.Annotations["runbook_url"] != runbook {
		t.Errorf("runbook_url %q, want the rule's %q", firing.Annotations["runbook_url"], runbook)
	}
	list := sys.DLQ(nil, "route", "list").Want(t, 0).Stdout
	if !strings.Contains(list, "github/main was paused by auto-pause: every call failed since") {
		t.Errorf("dlq route list does not say why github/main was paused:\n%s", list)
	}
	flow.Wait()
	obs.stop(t)

	resumedAt := time.Now()
	if n := calls.between("github", pausedSeen, resumedAt); n != 0 {
		t.Errorf("%d calls of github/main while it was paused, want none", n)
	}
	down.Store(false)
	sys.DLQ(nil, "route", "resume", "github/main", "--by", "e2e").Want(t, 0)
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, Timeout: time.Minute})
	t.Logf("resumed with the receiver up: %s", tally)
}
