// Command talonctl is the Talon operator CLI. See `talonctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/talonhq/talon/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], cli.DefaultFactory())
	stop()
	os.Exit(code)
}
