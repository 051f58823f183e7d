// Command talon runs a Talon coordinator or worker. See `talon --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/talonhq/talon/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}
