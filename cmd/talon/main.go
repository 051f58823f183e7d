// Command talon runs a Talon coordinator or worker. See `talon --help`.
package main

import (
	"context"
	"os"

	// The fallback roots make https blob stores verifiable in a container
	// image without a CA bundle (make image builds one from scratch); the
	// system's roots win wherever there are any.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/talonhq/talon/internal/app"
)

func main() {
	ctx, stop := app.SignalContext(context.Background())
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}
