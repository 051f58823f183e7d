package app

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// readyPoll is how often a process under systemd checks whether it has
// turned ready. The check reads the same Readiness that /readyz answers
// from; a tenth of a second is noise next to a start-up.
const readyPoll = 100 * time.Millisecond

// runNotifying runs a standalone daemon process (talon coordinator or
// talon worker) and, when systemd started it as a Type=notify service
// (NOTIFY_SOCKET is set), tells systemd READY=1 once the role first
// reports ready (what /readyz answers 200 for), and STOPPING=1 when ctx
// ends and the drain starts. Without NOTIFY_SOCKET it only runs run.
// talon dev does not notify: its processes are not the service's.
func runNotifying(ctx context.Context, run func(context.Context) error, ready func() bool, log *slog.Logger) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return run(ctx)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); watchReady(ctx, done, ready, log) }()
	err := run(ctx)
	close(done)
	wg.Wait()
	return err
}

// watchReady sends READY=1 the first time ready() holds and STOPPING=1
// when ctx ends; it returns then, or when done is closed (run returned).
func watchReady(ctx context.Context, done <-chan struct{}, ready func() bool, log *slog.Logger) {
	send := func(state string) {
		if _, err := daemon.SdNotify(false, state); err != nil {
			log.Warn("sd_notify failed", "state", state, "error", err)
		}
	}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	sent := false
	for {
		select {
		case <-ctx.Done():
			send(daemon.SdNotifyStopping + "\nSTATUS=draining")
			return
		case <-done:
			return
		case <-tick.C:
			if !sent && ready() {
				send(daemon.SdNotifyReady + "\nSTATUS=ready")
				sent = true
			}
		}
	}
}
