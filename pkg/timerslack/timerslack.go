// Package timerslack lengthens the timer slack of every thread of a
// service: how late Linux may wake a thread whose sleep has a deadline, so
// that it can wake it together with other work instead of on its own.
//
// A light-traffic processor is seldom idle for long, and while it is not,
// the Go runtime's monitor thread (sysmon) looks for work to take back
// after sleeps of 20 µs, which Linux's default slack of 50 µs lets last
// up to 70. At 1,000 events/s a profile put 14 % of the processor's CPU in
// that thread, and the process made about 4,000 nanosleep calls a second; with
// a slack of 1 ms, 1,800, and the processor spent 0.81-0.95 times the CPU
// per event (docs/performance.md, "The runtime's monitor and the timer
// slack"). Ingest and dlq serve, which do the same, spent up to a fifth
// less CPU per event at 10 to 100 events/s, ingest an eighth less at 1,000
// too ("Ingest and the timer slack"). Timers of the service fire up to the
// slack late; what arrives on a socket wakes its reader at once, whatever
// the slack.
//
// A thread sets only its own slack, and new threads take the slack of the
// thread that starts them; the runtime starts its monitor before main
// runs. So Ensure sets the calling thread's slack and starts the program
// again in place (execve of the same executable with the same arguments
// and environment: the same process id, nothing opened kept but standard
// input, output and error), which Linux lets keep the slack, so every
// thread of the new image has it.
package timerslack

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/hookline/hookline/pkg/envconf"
)

// Default is the slack a service asks for unless configured otherwise.
const Default = time.Millisecond

// Max bounds the slack a service may ask for: a longer one would delay
// its timers more than they are worth to it.
const Max = 100 * time.Millisecond

// ReadEnv reads HOOKLINE_TIMER_SLACK with r: the least timer slack of the
// service's threads, Default unless set, 0 to Max (0: leave it as it is).
func ReadEnv(r *envconf.Reader) time.Duration {
	return r.Duration("HOOKLINE_TIMER_SLACK", Default, 0, Max)
}

// Apply is Ensure for a service's main: a failure is written to w, named
// by the service, and the service goes on with the slack it has.
func Apply(w io.Writer, service string, want time.Duration) {
	if _, err := Ensure(want); err != nil {
		fmt.Fprintf(w, "%s: HOOKLINE_TIMER_SLACK: %v\n", service, err)
	}
}

// Text is the timer slack the process runs with (the calling thread's,
// which is every thread's after Ensure), for its start log, or why it
// could not be read.
func Text() string {
	d, err := current()
	if err != nil {
		return err.Error()
	}
	return d.String()
}

// execMark is set in the environment of the program started again, so
// that a kernel which did not keep the slack across execve is noticed
// instead of starting the program again and again. The new image removes
// it at once.
const execMark = "HOOKLINE_TIMER_SLACK_EXEC"

// Ensure gives the process a timer slack of at least want, starting the
// program again in place when the process has less (see the package
// comment). It returns only when no start was needed or it could not be
// made: with the slack the process now has, and why the slack is less than
// want, if it is. want 0 leaves the slack as it is. Call it first thing in
// main, before anything is opened or started that a new start would lose.
func Ensure(want time.Duration) (time.Duration, error) {
	mark, marked := os.LookupEnv(execMark)
	if marked {
		os.Unsetenv(execMark)
	}
	have, err := current()
	if !supported || err != nil || want <= 0 || have >= want {
		return have, err
	}
	if marked {
		return have, fmt.Errorf("timer slack %v after starting again to have %s: this kernel does not keep it across execve", have, mark)
	}
	runtime.LockOSThread() // the slack is this thread's; execve keeps this thread's
	defer runtime.UnlockOSThread()
	if err := set(want); err != nil {
		return have, err
	}
	env := append(os.Environ(), execMark+"="+want.String())
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	// Still here: the exec failed, and this thread alone has the slack.
	return have, fmt.Errorf("starting again with timer slack %v: %w", want, err)
}
