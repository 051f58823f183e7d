// Command profiledtalon is talon with a CPU profile taken on signal:
// SIGUSR1 starts one, SIGUSR2 stops it and writes it to
// $TALON_CPUPROFILE.<pid>.pprof (for go tool pprof). The fleet rows of
// make bench-report and make bench-fleet run their coordinator processes
// with it to profile a coordinator under a fleet; talon itself has no CPU
// profile route (admin's debug route leaves CPU profiles out, as they
// take seconds of a process's time).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/talonhq/talon/internal/app"
)

func main() {
	if base := os.Getenv("TALON_CPUPROFILE"); base != "" {
		go profileOnSignal(fmt.Sprintf("%s.%d.pprof", base, os.Getpid()))
	}
	ctx, stop := app.SignalContext(context.Background())
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}

// profileOnSignal profiles from each SIGUSR1 to the next SIGUSR2 into
// path (the last profile wins) for the life of the process.
func profileOnSignal(path string) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	var f *os.File
	for s := range ch {
		switch {
		case s == syscall.SIGUSR1 && f == nil:
			var err error
			if f, err = os.Create(path); err != nil {
				fmt.Fprintf(os.Stderr, "profiledtalon: %v\n", err)
				continue
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(os.Stderr, "profiledtalon: %v\n", err)
				f.Close()
				f = nil
			}
		case s == syscall.SIGUSR2 && f != nil:
			pprof.StopCPUProfile()
			f.Close()
			f = nil
		}
	}
}
