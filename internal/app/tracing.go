package app

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/talonhq/talon/internal/buildinfo"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/tracing/otlp"
	"go.opentelemetry.io/otel/trace"
)

// flushTimeout bounds the export of the last spans at shutdown: a
// receiver that is down must not hold the process's exit for long.
const flushTimeout = 5 * time.Second

// startTracing builds the process's trace provider from the OTEL_*
// environment (package tracing/otlp: off unless asked for) and logs where
// spans go. newRoleCmd has already checked the variables.
func startTracing(ctx context.Context, cfg *config.Config, role string, log *slog.Logger) (*otlp.Provider, error) {
	tp, err := otlp.New(ctx, os.Getenv, otlp.Process{Role: role, NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, Version: buildinfo.Get().Version})
	if err != nil {
		return nil, err
	}
	if tp.On() {
		log.Info("tracing on: exporting spans", "exporter", tp.Describe())
	}
	return tp, nil
}

// firstTracers returns the first of tps, or nil.
func firstTracers(tps []trace.TracerProvider) trace.TracerProvider {
	if len(tps) == 0 {
		return nil
	}
	return tps[0]
}

// stopTracing exports the spans still buffered, within flushTimeout.
func stopTracing(tp *otlp.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("spans not exported at shutdown", "error", err)
	}
}
