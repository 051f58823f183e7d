package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"google.golang.org/api/option"
)

// Environment variables naming prebuilt emulators; when unset, the
// repo's scripts build or install them once and cache them.
const (
	EnvGCSBin     = "TALON_GCS_BIN"     // fake-gcs-server (build-gcs.sh)
	EnvAzuriteBin = "TALON_AZURITE_BIN" // azurite-blob (install-azurite.sh)
)

// toolBinary returns $env when set, else what script (next to
// build-servers.sh) prints. It fails t when neither yields an executable
// file; it never skips.
func toolBinary(t testing.TB, env, script, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if err := checkExecutable(p); err != nil {
			t.Fatalf("testenv: %s=%q: %v (unset it to let internal/testenv/%s provide %s)", env, p, err, script, name)
		}
		return p
	}
	servers, err := buildScript()
	if err != nil {
		t.Fatalf("testenv: %s: %v", name, err)
	}
	p, err := runBuildScript(filepath.Join(filepath.Dir(servers), script))
	if err != nil {
		t.Fatalf("testenv: %s not found: %s is unset and %s failed: %v", name, env, script, err)
	}
	if err := checkExecutable(p); err != nil {
		t.Fatalf("testenv: %s printed %q: %v", script, p, err)
	}
	return p
}

// startOnFreePort starts p on n free loopback ports (args gives its
// arguments for them) until it accepts connections on the first,
// retrying with new ports when one was taken. It returns the ports.
func startOnFreePort(t testing.TB, p *proc, n int, args func(ports []int) []string) []int {
	t.Helper()
	t.Cleanup(func() {
		if err := p.stop(0); err != nil {
			t.Errorf("testenv: %v", err)
		}
		if t.Failed() {
			t.Logf("--- %s log %s ---\n%s", p.name, p.logPath, p.logTail())
		}
	})
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(n)
		if err != nil {
			t.Fatalf("testenv: %s: %v", p.name, err)
		}
		p.mu.Lock()
		p.args = args(ports)
		p.mu.Unlock()
		err = waitListening(p, fmt.Sprintf("127.0.0.1:%d", ports[0]), 90*time.Second)
		if err == nil {
			return ports
		}
		tail := p.logTail()
		_ = p.stop(0)
		if attempt < startAttempts && strings.Contains(tail, "in use") {
			continue
		}
		t.Fatalf("testenv: %s did not start: %v\n--- log ---\n%s", p.name, err, tail)
	}
}

func waitListening(p *proc, addr string, d time.Duration) error {
	if err := p.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited():
			return fmt.Errorf("%s exited: %s", p.name, p.exitStatus())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s at %s did not accept connections within %s", p.name, addr, d)
}

// GCS is a running fake-gcs-server on 127.0.0.1 (in memory, plain HTTP).
type GCS struct {
	// Endpoint is http://127.0.0.1:PORT, the gs:// URL's endpoint=.
	Endpoint string
	client   *storage.Client
}

// StartGCS starts fake-gcs-server and waits until it answers. A cleanup
// kills it.
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	bin := toolBinary(t, EnvGCSBin, "build-gcs.sh", "fake-gcs-server")
	dir := t.TempDir()
	p := &proc{name: "fake-gcs-server", bin: bin, logPath: filepath.Join(dir, "fake-gcs-server.log"), env: childEnv()}
	port := startOnFreePort(t, p, 1, func(ports []int) []string {
		return []string{"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(ports[0]), "-backend", "memory", "-log-level", "warn",
			"-public-host", fmt.Sprintf("127.0.0.1:%d", ports[0]), "-external-url", fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	})[0]
	g := &GCS{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port)}
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("testenv: fake-gcs-server client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	g.client = c
	return g
}

// URL is the gs:// URL of bucket/prefix on this server.
func (g *GCS) URL(bucket, prefix string) string {
	return "gs://" + bucket + "/" + prefix + "?anonymous=true&endpoint=" + g.Endpoint
}

// CreateBucket creates bucket.
func (g *GCS) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	if err := g.client.Bucket(bucket).Create(context.Background(), "talon-test", nil); err != nil {
		t.Fatalf("testenv: create bucket %s: %v", bucket, err)
	}
}

// Put writes data to bucket/key (GCS computes its CRC32C and MD5).
func (g *GCS) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	w := g.client.Bucket(bucket).Object(key).NewWriter(context.Background())
	if _, err := w.Write(data); err != nil {
		t.Fatalf("testenv: put %s/%s: %v", bucket, key, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("testenv: put %s/%s: %v", bucket, key, err)
	}
}

// Azurite is a running Azurite blob service on 127.0.0.1 (in memory).
type Azurite struct {
	// Endpoint is http://127.0.0.1:PORT/devstoreaccount1, the account's
	// blob service URL.
	Endpoint string
	// ConnectionString signs as the emulator's well-known account.
	ConnectionString string
	client           *azblob.Client
}

// AzuriteAccount is the emulator's account; azuriteKey is its well-known
// key (published in Azurite's documentation, not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// StartAzurite starts Azurite's blob service and waits until it answers.
// A cleanup kills it.
func StartAzurite(t testing.TB) *Azurite {
	t.Helper()
	bin := toolBinary(t, EnvAzuriteBin, "install-azurite.sh", "azurite-blob")
	dir := t.TempDir()
	p := &proc{name: "azurite", bin: bin, logPath: filepath.Join(dir, "azurite.log"), env: childEnv()}
	port := startOnFreePort(t, p, 1, func(ports []int) []string {
		return []string{"--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(ports[0]), "--inMemoryPersistence", "--silent",
			"--disableTelemetry", "--skipApiVersionCheck"}
	})[0]
	a := &Azurite{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount)}
	a.ConnectionString = fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;", AzuriteAccount, azuriteKey, a.Endpoint)
	c, err := azblob.NewClientFromConnectionString(a.ConnectionString, nil)
	if err != nil {
		t.Fatalf("testenv: azurite client: %v", err)
	}
	a.client = c
	return a
}

// URL is the az:// URL of container/prefix on this server; the store
// signs with ConnectionString from AZURE_STORAGE_CONNECTION_STRING.
func (a *Azurite) URL(container, prefix string) string {
	return "az://" + AzuriteAccount + "/" + container + "/" + prefix
}

// CreateContainer creates container.
func (a *Azurite) CreateContainer(t testing.TB, container string) {
	t.Helper()
	if _, err := a.client.CreateContainer(context.Background(), container, nil); err != nil {
		t.Fatalf("testenv: create container %s: %v", container, err)
	}
}

// Put uploads data to container/key in one request (Azure keeps its
// Content-MD5).
func (a *Azurite) Put(t testing.TB, container, key string, data []byte) {
	t.Helper()
	if _, err := a.client.UploadBuffer(context.Background(), container, key, data, nil); err != nil {
		t.Fatalf("testenv: put %s/%s: %v", container, key, err)
	}
}
