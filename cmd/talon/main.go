// Command talon runs a Talon coordinator or worker. See `talon --help`.
package main

import (
	"context"
	"os"

	"github.com/talonhq/talon/internal/app"
)

func main() {
	ctx, stop := app.SignalContext(context.Background())
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}
