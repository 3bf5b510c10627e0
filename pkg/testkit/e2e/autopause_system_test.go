package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestAutoPauseOfAGoneReceiver: github's route "main" has
// auto_pause_after: 5s, trial_every: 2s, and its receiver answers every
// call 503. Once every call has failed for 5 s the processor pauses the
// route on the control topic (by auto-pause, with why); dlq route list
// shows it, the HooklineRouteAutoPaused alert reaches a real Alertmanager
// receiver, and the deliveries still coming wait in the route's lane,
// called only by the trial calls (at most one per 2 s). The receiver comes
// back while the route is paused: a trial reaches it and dlq status says
// the route answers again (answering_again), still paused. Resumed, the
// lane drains: every delivery done once (lost 0, doubled 0, the trials'
// included); stripe is never paused.
func TestAutoPauseOfAGoneReceiver(t *testing.T) {
	skipShort(t)
	requireObserveTools(t)
	const alert = "HooklineRouteAutoPaused"
	const trialEvery = 2 * time.Second
	rules, runbook := rulesWithFor(t, alert, "1s")
	recv := newAlertReceiver(t)

	sys := e2e.New(t, e2e.Options{Partitions: 4, Routes: map[string][]e2e.Route{
		"github": {{Name: "main", AutoPauseAfter: 5 * time.Second, TrialEvery: trialEvery}},
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

	// While paused, the trial calls alone reach the receiver, at their
	// pace: at most one per trial_every (and one more for the edges).
	downUntil := time.Now()
	if n, most := calls.between("github", pausedSeen, downUntil), int(downUntil.Sub(pausedSeen)/trialEvery)+1; n > most {
		t.Errorf("%d calls of github/main in the %.1fs it was paused, want the trial calls alone: at most %d", n, downUntil.Sub(pausedSeen).Seconds(), most)
	}
	down.Store(false)
	answering := waitAnswering(t, sys, "github", "main", time.Minute)
	answeredAt := time.Now()
	t.Logf("%.1fs after the receiver came back: dlq status says github/main answers again (trial answered at %s)", answeredAt.Sub(downUntil).Seconds(), answering)
	if n := calls.between("github", downUntil, answeredAt); n == 0 {
		t.Error("dlq status says answering again, but no call reached the receiver since it came back")
	}
	if list := sys.DLQ(nil, "route", "list").Want(t, 0).Stdout; !strings.Contains(list, "github/main was paused by auto-pause") {
		t.Errorf("github/main is no longer paused after its trial answered: a trial does not resume the route\n%s", list)
	}
	sys.DLQ(nil, "route", "resume", "github/main", "--by", "e2e").Want(t, 0)
	// A trial that failed is a call that leaves no outcome (it spends no
	// attempt): the ledger counts it as an extra call, at most one per
	// trial_every while the receiver was down and the route paused.
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, Timeout: time.Minute, ExtraCalls: int(downUntil.Sub(wentDown)/trialEvery) + 1})
	t.Logf("resumed with the receiver up: %s", tally)
}

// waitAnswering waits until dlq status --json gives provider/route an
// answering_again (its trial call was answered) and returns it.
func waitAnswering(t *testing.T, sys *e2e.System, provider, route string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		out := sys.DLQ(nil, "status", "--json").Want(t, 0).Stdout
		var rep struct {
			Providers []struct {
				Provider string `json:"provider"`
				Routes   []struct {
					Route          string `json:"route"`
					AutoPaused     string `json:"auto_paused"`
					AnsweringAgain string `json:"answering_again"`
				} `json:"routes"`
			} `json:"providers"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("dlq status --json: %v\n%s", err, out)
		}
		for _, p := range rep.Providers {
			for _, r := range p.Routes {
				if p.Provider == provider && r.Route == route {
					if r.AnsweringAgain != "" {
						return r.AnsweringAgain
					}
					last = fmt.Sprintf("auto_paused %q, no answering_again", r.AutoPaused)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dlq status did not say %s/%s answers again within %s; last: %s", provider, route, within, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
