// Command profiledtalon is talon with profiles taken on signal: with
// $TALON_CPUPROFILE set, SIGUSR1 starts a CPU profile and SIGUSR2 stops it
// and writes it to $TALON_CPUPROFILE.<pid>.pprof; with $TALON_HEAPPROFILE
// set, SIGUSR2 also writes a heap profile (after a garbage collection) to
// $TALON_HEAPPROFILE.<pid>.pprof (both for go tool pprof). The fleet rows
// of make bench-report and make bench-fleet run their coordinator
// processes with it to profile a coordinator under a fleet, and the
// 50,000-worker row of make bench-scale for its heap (HEAP_PROFILE); talon
// itself has no CPU profile route (admin's debug route leaves CPU profiles
// out, as they take seconds of a process's time) and serves its heap
// profile only to a token of the debug scope.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/talonhq/talon/internal/app"
)

func main() {
	cpu, heap := os.Getenv("TALON_CPUPROFILE"), os.Getenv("TALON_HEAPPROFILE")
	if cpu != "" || heap != "" {
		go profileOnSignal(profilePath(cpu), profilePath(heap))
	}
	ctx, stop := app.SignalContext(context.Background())
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}

// profilePath is base.<pid>.pprof, or "" for no base.
func profilePath(base string) string {
	if base == "" {
		return ""
	}
	return fmt.Sprintf("%s.%d.pprof", base, os.Getpid())
}

// profileOnSignal profiles the CPU from each SIGUSR1 to the next SIGUSR2
// into cpuPath, and writes the heap into heapPath at each SIGUSR2 (the
// last profile wins), for the life of the process; "" turns either off.
func profileOnSignal(cpuPath, heapPath string) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	var f *os.File
	for s := range ch {
		switch {
		case s == syscall.SIGUSR1 && f == nil && cpuPath != "":
			var err error
			if f, err = os.Create(cpuPath); err != nil {
				fmt.Fprintf(os.Stderr, "profiledtalon: %v\n", err)
				continue
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(os.Stderr, "profiledtalon: %v\n", err)
				f.Close()
				f = nil
			}
		case s == syscall.SIGUSR2:
			if f != nil {
				pprof.StopCPUProfile()
				f.Close()
				f = nil
			}
			if heapPath != "" {
				writeHeap(heapPath)
			}
		}
	}
}

// writeHeap writes the heap profile, as of a collection just made, to
// path: through a temporary file, so that a reader never sees half of it.
func writeHeap(path string) {
	runtime.GC()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profiledtalon: heap profile: %v\n", err)
	}
}
