package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/client"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/metrics"
	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const clusterID = "test"

// testTiming heartbeats quickly (the recovery hold is heartbeat-interval +
// request-timeout) but makes records late only long after any test ends:
// the coordinator never proposes a seeded record late or expired by
// itself, and the store runs on a fake clock, so its leases run out only
// when a test says so. Tests about lateness and expiry propose the
// transition themselves (env.transition), as a coordinator would.
var testTiming = cluster.Timing{HeartbeatInterval: 100 * time.Millisecond, UnhealthyAfter: time.Minute, LeaseTTL: 2 * time.Minute}

// exposeAll turns every group on, with no tokens.
func exposeAll() config.AdminConfig {
	return config.AdminConfig{ExposeHealth: true, ExposeMetrics: true, ExposeAPI: true, ExposeUI: true}
}

// integration skips tests that run a real coordinator or worker on
// loopback under -short.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs a coordinator on loopback")
	}
}

// env is a running coordinator (or worker) with an admin server over it.
type env struct {
	store  *memory.Store
	clock  *testsupport.FakeClock
	coord  *coordinator.Coordinator
	worker *worker.Worker
	ctrl   string // coordinator control address
	reg    *prometheus.Registry
	proc   *metrics.Process
	logs   *testsupport.SyncBuffer
	log    *slog.Logger
	srv    *Server
	url    string // base URL of the admin handler
}

type envOptions struct {
	admin config.AdminConfig
	ui    http.Handler
	// faultFromStart makes the store fail before the coordinator starts,
	// so it never has a good view.
	faultFromStart error
}

// startCoordinator runs a coordinator over a memory store on a fake
// clock, waits until it is ready (unless the store fails from the start)
// and serves an admin server for it on loopback.
func startCoordinator(t testing.TB, o envOptions) *env {
	t.Helper()
	integration(t)
	e := &env{clock: testsupport.NewFakeClock(time.Now().Truncate(time.Millisecond)), logs: &testsupport.SyncBuffer{}}
	e.log = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.store = memory.New(memory.Options{Clock: e.clock.Now})
	t.Cleanup(func() { e.store.Close() })
	if o.faultFromStart != nil {
		e.store.SetFault(o.faultFromStart)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl = ln.Addr().String()
	e.reg = prometheus.NewRegistry()
	if e.proc, err = metrics.NewProcess(e.reg, "coordinator"); err != nil {
		t.Fatal(err)
	}
	e.coord, err = coordinator.New(coordinator.Options{
		ClusterID: clusterID, NodeID: "coord-a", Timing: testTiming,
		RequestTimeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		Store: e.store, Listener: ln, Logger: e.log, Clock: time.Now, Registerer: e.reg, Process: e.proc,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.coord.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if o.faultFromStart == nil {
		// Ready, and its own record says so (the first one, written before
		// the first snapshot, does not).
		waitFor(t, "coordinator ready", func() bool {
			if !e.coord.Readiness().Ready {
				return false
			}
			snap, err := e.store.Snapshot(context.Background(), clusterID)
			if err != nil {
				return false
			}
			r := snap.Find(cluster.Key{ClusterID: clusterID, Role: cluster.RoleCoordinator, NodeID: "coord-a"})
			return r != nil && r.Ready && r.Health == cluster.HealthHealthy
		})
	}
	e.serve(t, Options{Config: o.admin, Coordinator: e.coord, Jobs: e.coord.Jobs(), UI: o.ui})
	return e
}

// serve builds the admin server from opts (filling in the environment's
// dependencies) and serves its handler on loopback.
func (e *env) serve(t testing.TB, opts Options) {
	t.Helper()
	opts.Gatherer, opts.Registerer, opts.Process = e.reg, e.reg, e.proc
	opts.Logger, opts.Clock = e.log, time.Now
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
}

// startWorker runs a coordinator and a real worker registered with it, and
// serves an admin server for the worker.
func startWorker(t *testing.T, admin config.AdminConfig, usage UsageSource) *env {
	t.Helper()
	c := startCoordinator(t, envOptions{admin: exposeAll()})
	e := &env{store: c.store, clock: c.clock, ctrl: c.ctrl, logs: c.logs, log: c.log, reg: prometheus.NewRegistry()}
	var err error
	if e.proc, err = metrics.NewProcess(e.reg, "worker"); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Options{Coordinators: []string{c.ctrl}, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.worker, err = worker.New(worker.Options{
		ClusterID: clusterID, NodeID: "w-real", Coordinators: []string{c.ctrl}, Timing: testTiming,
		Labels:         map[string]string{"zone": "z1"},
		RequestTimeout: 300 * time.Millisecond, ShutdownTimeout: time.Second,
		DataListener: ln, DataHandler: http.NotFoundHandler(), Client: cl,
		Logger: e.log, Clock: time.Now, Registerer: e.reg, Process: e.proc,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "worker ready", func() bool { return e.worker.Readiness().Ready })
	e.serve(t, Options{Config: admin, Worker: e.worker, WorkerUsage: usage})
	return e
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// workerRecord is a healthy, ready worker record.
func workerRecord(id string, labels map[string]string) *cluster.Record {
	return &cluster.Record{
		ClusterID: clusterID, NodeID: id, Role: cluster.RoleWorker, IncarnationID: "inc-" + id,
		Address: id + ".data.test:7500", Version: "test", Health: cluster.HealthHealthy, Ready: true, Labels: labels,
		FeatureLevel: cluster.BuildLevel, StartTimeUnixMs: 1_784_800_000_000,
	}
}

// put writes rec to the store with the test lease.
func (e *env) put(t testing.TB, rec *cluster.Record, ttl time.Duration) {
	t.Helper()
	if _, err := e.store.UpsertNode(context.Background(), rec, ttl); err != nil {
		t.Fatal(err)
	}
}

// transition proposes tr for the worker id at the version the store holds
// now, as a coordinator that watched it go unchanged would, and fails t
// unless the store accepts it.
func (e *env) transition(t testing.TB, id string, tr state.Transition) {
	t.Helper()
	key := cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: id}
	snap, err := e.store.Snapshot(context.Background(), clusterID)
	if err != nil {
		t.Fatal(err)
	}
	rec := snap.Find(key)
	if rec == nil {
		t.Fatalf("worker %s is not in the store", id)
	}
	res, err := e.store.ProposeTransition(context.Background(), key, rec.IncarnationID, rec.HeartbeatSeq, tr)
	if err != nil || res.Outcome != state.OutcomeAccepted {
		t.Fatalf("%s %s: %+v, %v", tr, id, res, err)
	}
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// apiError decodes an error answer.
func (r *response) apiError(t *testing.T) apiv1.ErrorBody {
	t.Helper()
	var er apiv1.ErrorResponse
	r.decode(t, &er)
	return er.Error
}

// do sends method path to the environment's admin server with token (none
// when empty), checks the answer against the OpenAPI document and returns it.
func (e *env) do(t *testing.T, method, path, token string) *response {
	t.Helper()
	return doURL(t, http.DefaultClient, method, e.url+path, token)
}

// doWith is do with exactly the headers hdr besides Authorization: a
// write without the X-Talon-Request header that do adds as talonctl does.
func (e *env) doWith(t *testing.T, method, path, token string, hdr http.Header) *response {
	t.Helper()
	return doURLWith(t, http.DefaultClient, method, e.url+path, token, hdr)
}

// scoped returns admin tokens, each named after itself, with scopes.
func scoped(scopes config.AdminScope, tokens ...string) []config.AdminToken {
	out := make([]config.AdminToken, len(tokens))
	for i, tok := range tokens {
		out[i] = config.AdminToken{Name: "name-of-" + tok[:5], Scopes: scopes, Token: config.Secret(tok)}
	}
	return out
}

// allScopes are an operator's scopes: every scope but debug.
const allScopes = config.ScopeRead | config.ScopeOperate | config.ScopeMetrics

func (e *env) get(t *testing.T, path string) *response {
	t.Helper()
	return e.do(t, http.MethodGet, path, "")
}

func doURL(t *testing.T, hc *http.Client, method, url, token string) *response {
	t.Helper()
	var hdr http.Header
	if method != http.MethodGet && method != http.MethodHead {
		hdr = http.Header{apiv1.HeaderRequest: {"1"}} // as talonctl sends
	}
	return doURLWith(t, hc, method, url, token, hdr)
}

func doURLWith(t *testing.T, hc *http.Client, method, url, token string, hdr http.Header) *response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header, body: body}
	checkOpenAPI(t, req, r)
	return r
}

// openAPIRouter loads the embedded document once per test binary run.
var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(apiv1.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return legacy.NewRouter(doc)
})

// checkOpenAPI fails the test when an answer does not match the OpenAPI
// document (see openAPIMismatch).
func checkOpenAPI(t *testing.T, req *http.Request, r *response) {
	t.Helper()
	if err := openAPIMismatch(req, r); err != nil {
		t.Errorf("%s %s answered %d, which does not match the OpenAPI document: %v\nbody: %.600s", req.Method, req.URL.Path, r.status, err, r.body)
	}
}

// openAPIMismatch validates an answer to a GET against the OpenAPI
// document when the document describes the path (the UI and unknown paths
// it does not): the status must be documented for the operation and the
// body must match its schema, which forbids undocumented fields.
func openAPIMismatch(req *http.Request, r *response) error {
	router, err := openAPIRouter()
	if err != nil {
		return fmt.Errorf("loading the document: %w", err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil || req.Method != http.MethodGet {
		return nil // not an API path (UI, unknown), or not a GET
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key to
// dir and returns the file names and a pool trusting the certificate.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "talon-admin-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// mentions returns the first of ss that body contains, or "".
func mentions(body []byte, ss ...string) string {
	for _, s := range ss {
		if strings.Contains(string(body), s) {
			return s
		}
	}
	return ""
}

// cordonedInStore reports whether worker id's record in the store carries
// an operator's cordon.
func (e *env) cordonedInStore(t testing.TB, id string) bool {
	t.Helper()
	snap, err := e.store.Snapshot(context.Background(), clusterID)
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Find(cluster.Key{ClusterID: clusterID, Role: cluster.RoleWorker, NodeID: id})
	return r != nil && r.Cordoned()
}
