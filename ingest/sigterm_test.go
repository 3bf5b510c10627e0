package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/proctest"
	"github.com/hookline/hookline/pkg/timerslack"
)

// TestSIGTERMDuringBurst runs the built binary, sends SIGTERM while eight
// clients post as fast as they can, and checks that the process exits 0 and
// that every request answered 202 is in the topic.
func TestSIGTERMDuringBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ingest binary")
	}
	e := newEnv(t)
	addr := e2e.FreeAddr(t)
	e.vars["HOOKLINE_INGEST_ADDR"] = addr
	e.vars["HOOKLINE_LOG_LEVEL"] = "info" // the start log's timer_slack
	var env []string
	for k, v := range e.vars {
		env = append(env, k+"="+v)
	}
	p := proctest.Start(t, proctest.Binary(t, "ingest"), env)
	base := "http://" + addr
	e2e.WaitHTTP(t, base+"/readyz", 60*time.Second)
	checkTimerSlack(t, p)

	var (
		mu       sync.Mutex
		accepted []string
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(8 * time.Second) // bounded: the clients stop by themselves
	client := &http.Client{Timeout: 10 * time.Second}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				body := fmt.Sprintf(`{"id":"evt_term_%d_%d","type":"x"}`, w, i)
				req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				p, _ := e.reg.Get("stripe")
				_ = p.Sign([]byte(body), time.Now(), req.Header)
				resp, err := client.Do(req)
				if err != nil {
					return // the listener closed: shutdown has begun
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					accepted = append(accepted, fmt.Sprintf("stripe:evt_term_%d_%d", w, i))
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(700 * time.Millisecond)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("ingest did not exit 0 after SIGTERM: %v\n%s", err, p.Output())
	}
	wg.Wait()
	if len(accepted) < 20 {
		t.Fatalf("only %d requests accepted before SIGTERM: the test proves nothing", len(accepted))
	}

	want := map[string]bool{}
	for _, k := range accepted {
		want[k] = true
	}
	cl := kafkatest.Client(t, e.brokers, kgo.ConsumeTopics(e.raw()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(want) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { delete(want, string(r.Key)) })
	}
	if len(want) > 0 {
		t.Fatalf("%d of %d accepted deliveries are not in %s", len(want), len(accepted), e.raw())
	}
	t.Logf("%d deliveries accepted around SIGTERM, all in the topic", len(accepted))
}

// checkTimerSlack: the ingest binary, started with HOOKLINE_TIMER_SLACK
// unset, runs every thread with the default slack, and its start log says
// so (package timerslack: main starts it again in place).
func checkTimerSlack(t *testing.T, p *proctest.Proc) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return // a Linux setting: elsewhere nothing is set
	}
	p.CheckTimerSlack(t, timerslack.Default)
	if want := `"timer_slack":"` + timerslack.Default.String() + `"`; !strings.Contains(p.Output(), want) {
		t.Errorf("the start log does not say %s:\n%s", want, p.Output())
	}
}
