package app

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/testsupport"
)

// TestDevCluster runs `talon dev` in process and checks it serves a
// coordinator and three ready workers with traffic from --demo-load.
func TestDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	var out testsupport.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunDev(ctx, DevOptions{Workers: 3, BaseDir: t.TempDir(), DemoLoad: true, ListenHost: "127.0.0.1"}, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDev: %v", err)
		}
	}()
	re := regexp.MustCompile(`web UI and /api/v1\s+(http://\S+)/`)
	var url string
	deadline := time.Now().Add(20 * time.Second)
	for url == "" {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no admin URL printed:\n%s", out.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	api, err := apiv1.NewClient([]string{url}, apiv1.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var served uint64
	for served == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("dev cluster never served demo traffic; output:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
		list, err := api.AllNodes(context.Background(), apiv1.NodeFilter{Role: "worker"})
		if err != nil || len(list.Items) != 3 {
			continue
		}
		served = 0
		for _, n := range list.Items {
			if !n.Ready {
				served = 0
				break
			}
			served += n.Counters.BytesServedTotal
		}
	}
}
