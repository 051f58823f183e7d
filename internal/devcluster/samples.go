package devcluster

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/pki"
)

// Sample is an object a dev cluster writes into its blob store.
type Sample struct {
	Name string
	Size int64
}

// samples are the objects a dev cluster writes.
var samples = []Sample{
	{"samples/small.bin", 100 << 10},
	{"samples/medium.bin", 3 << 20},
	{"samples/large.bin", 18 << 20},
	{"samples/huge.bin", 40 << 20},
	{"logs/2026/11/30/app.log", 9<<20 + 123},
	{"datasets/train-00001.parquet", 25 << 20},
}

// Samples returns the objects a dev cluster writes into <dir>/blobs, with
// deterministic content.
func Samples() []Sample {
	return slices.Clone(samples)
}

// writeSamples writes the sample objects with deterministic content,
// keeping files that already have the right size.
func writeSamples(dir string) error {
	for i, o := range samples {
		p := filepath.Join(dir, filepath.FromSlash(o.Name))
		if fi, err := os.Stat(p); err == nil && fi.Size() == o.Size {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(uint64(i), 42))
		buf := make([]byte, o.Size+7)
		for j := 0; j < len(buf)-7; j += 8 {
			binary.LittleEndian.PutUint64(buf[j:], r.Uint64())
		}
		buf = buf[:o.Size]
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// demoLoad reads sample objects through the cluster at a gentle pace so
// the views show traffic.
func demoLoad(ctx context.Context, controls []string, creds *pki.Source, log *slog.Logger) {
	cl, err := client.New(client.Options{Coordinators: controls, CacheTTL: 5 * time.Second,
		TLS: creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}})})
	if err != nil {
		return
	}
	defer cl.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = creds.ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleWorker}})
	defer tr.CloseIdleConnections()
	r := &client.ObjectReader{Client: cl, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: tr}, BlockSize: 4 << 20, Replicas: 2, TLS: true, Verify: true}
	t := time.NewTicker(700 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o := samples[rand.N(len(samples))]
		if _, err := r.ReadObject(ctx, o.Name, io.Discard); err != nil && ctx.Err() == nil {
			log.Debug("demo read failed", "object", o.Name, "error", err)
		}
	}
}
