package talontest

// Shared scaffolding of the liveness and fault tests
// (internal/integration/faults/liveness_test.go,
// issue 24): the timings they run with, a cluster of real coordinator and
// worker processes with mutual TLS on a real store, a poller that samples
// every coordinator's answers every 50 ms, and the analyses the tests
// assert on.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/pki"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/testenv"
	"github.com/talonhq/talon/internal/testsupport"
)

// LiveTiming is the heartbeat timing of one cluster of the liveness tests.
// Every timing those tests use is one of the values below.
type LiveTiming struct {
	Heartbeat, Request, Unhealthy, LeaseTTL time.Duration
}

var (
	// FastTiming is what most liveness tests run with: short enough that a
	// lease expires within seconds, and inside the rule that tolerates one
	// lost heartbeat: unhealthy-after 2 s >= 2 x 500 ms + 500 ms.
	FastTiming = LiveTiming{Heartbeat: 500 * time.Millisecond, Request: 500 * time.Millisecond, Unhealthy: 2 * time.Second, LeaseTTL: 4 * time.Second}
	// MismatchCluster is the coordinators' timing of TestTimingMismatch,
	// the one `talon dev` prints: 3 s >= 2 x 1 s + 1 s.
	MismatchCluster = LiveTiming{Heartbeat: time.Second, Request: time.Second, Unhealthy: 3 * time.Second, LeaseTTL: 6 * time.Second}
	// MismatchWorker is the worker's own timing there: a 5 s interval (the
	// default), valid on its own (15 s >= 2 x 5 s + 1 s).
	MismatchWorker = LiveTiming{Heartbeat: 5 * time.Second, Request: time.Second, Unhealthy: 15 * time.Second, LeaseTTL: 30 * time.Second}
)

// PollEvery is the poller's sampling interval.
const PollEvery = 50 * time.Millisecond

// Check fails t unless lt satisfies unhealthy-after >= 2 x heartbeat-interval
// + request-timeout (one lost heartbeat plus a slow request) and the store's
// whole-second lease TTL.
func (lt LiveTiming) Check(t *testing.T) {
	t.Helper()
	if lt.Unhealthy < 2*lt.Heartbeat+lt.Request || lt.LeaseTTL <= lt.Unhealthy || lt.LeaseTTL%time.Second != 0 {
		t.Fatalf("test timing %+v breaks unhealthy-after >= 2 x heartbeat-interval + request-timeout < lease-ttl (whole seconds)", lt)
	}
}

func (lt LiveTiming) args() []string {
	return []string{"--heartbeat-interval", lt.Heartbeat.String(), "--unhealthy-after", lt.Unhealthy.String(),
		"--lease-ttl", lt.LeaseTTL.String(), "--request-timeout", lt.Request.String(),
		"--drain-delay", "0s", "--shutdown-timeout", "2s"}
}

// LiveCluster is a Talon cluster of real processes with mutual TLS on a
// real store, built up by a test.
type LiveCluster struct {
	t      *testing.T
	PKI    *PKI
	Timing LiveTiming
	store  []string // backend flags of every coordinator
	blobs  string
	// replicas is passed as --coordinator-replicas.
	replicas int
	// Client is the credential the poller's lookups use.
	Client *tls.Config
	// CoordExtra are flags added to every coordinator's (after the
	// timing flags, so they override them).
	CoordExtra []string

	Etcd       *testenv.EtcdCluster   // nil on Kubernetes
	Kube       *testenv.KubeAPIServer // nil on etcd
	Clientset  kubernetes.Interface   // nil on etcd
	EtcdClient *clientv3.Client       // nil on Kubernetes
}

// NewEtcdCluster starts a 3-member etcd cluster with mutual TLS and returns
// a LiveCluster whose coordinators use it.
func NewEtcdCluster(t *testing.T, lt LiveTiming, replicas int) *LiveCluster {
	t.Helper()
	lt.Check(t)
	e := testenv.StartEtcdCluster(t, testenv.EtcdClusterOptions{})
	f := e.TLSFiles()
	c := NewLiveCluster(t, lt, replicas, []string{"--state-backend", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints(), ","),
		"--etcd-ca-file", f.CAFile, "--etcd-cert-file", f.CertFile, "--etcd-key-file", f.KeyFile})
	c.Etcd, c.EtcdClient = e, e.Client(t)
	return c
}

// NewKubeCluster starts a kube-apiserver with namespace talon, on its own
// single-member etcd that requires client certificates (KubeOptions takes
// a single Etcd), and returns a LiveCluster whose coordinators use it.
func NewKubeCluster(t *testing.T, lt LiveTiming, replicas int) *LiveCluster {
	t.Helper()
	lt.Check(t)
	k := testenv.StartKubeAPIServer(t, testenv.KubeOptions{Etcd: testenv.StartEtcd(t, testenv.EtcdOptions{ClientCertAuth: true})})
	cs, err := kubernetes.NewForConfig(k.RestConfig(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "talon"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := NewLiveCluster(t, lt, replicas, []string{"--state-backend", "kubernetes", "--kubeconfig", k.WriteKubeconfig(t, k.AdminToken()), "--kube-namespace", "talon"})
	c.Kube, c.Clientset = k, cs
	return c
}

// NewLiveCluster returns an empty LiveCluster with its own PKI whose
// processes use the store flags store.
func NewLiveCluster(t *testing.T, lt LiveTiming, replicas int, store []string) *LiveCluster {
	p := NewPKI(t)
	return &LiveCluster{
		t: t, PKI: p, Timing: lt, store: store, blobs: t.TempDir(), replicas: replicas,
		Client: p.Source(t, pki.RoleClient, "poller").ClientConfig(pki.Expect{Roles: []pki.Role{pki.RoleCoordinator}}),
	}
}

// Coordinator starts coordinator id (not waiting for it).
func (c *LiveCluster) Coordinator(id string) *Proc {
	c.t.Helper()
	return c.CoordinatorBin("", id)
}

// CoordinatorBin starts coordinator id with the talon binary bin ("" for
// HEAD's), not waiting for it.
func (c *LiveCluster) CoordinatorBin(bin, id string) *Proc {
	c.t.Helper()
	ctl, admin := FreeAddr(c.t), FreeAddr(c.t)
	args := []string{"coordinator", "--cluster-id", "it", "--node-id", id, "--listen", ctl, "--admin-listen", admin, "--log-level", "info",
		"--ha", "--coordinator-replicas", fmt.Sprint(c.replicas)}
	args = append(args, c.Timing.args()...)
	args = append(args, c.CoordExtra...)
	args = append(args, c.store...)
	args = append(args, c.PKI.Args(c.t, pki.RoleCoordinator, id)...)
	return StartBin(c.t, bin, id, nil, args...)
}

// Worker starts worker id heartbeating to the coordinators at ctls, with
// timing lt (the cluster's when zero).
func (c *LiveCluster) Worker(id string, ctls []string, lt LiveTiming) *Proc {
	c.t.Helper()
	return c.WorkerBin("", id, ctls, lt)
}

// WorkerBin is Worker with the talon binary bin ("" for HEAD's).
func (c *LiveCluster) WorkerBin(bin, id string, ctls []string, lt LiveTiming) *Proc {
	c.t.Helper()
	if lt == (LiveTiming{}) {
		lt = c.Timing
	}
	args := []string{"worker", "--cluster-id", "it", "--node-id", id, "--listen", FreeAddr(c.t), "--admin-listen", FreeAddr(c.t),
		"--coordinators", strings.Join(ctls, ","), "--blob-store", "file://" + c.blobs, "--cache-dir", c.t.TempDir(),
		"--cache-capacity", "64MiB", "--block-size", "1MiB", "--log-level", "info"}
	args = append(args, lt.args()...)
	args = append(args, c.PKI.Args(c.t, pki.RoleWorker, id)...)
	return StartBin(c.t, bin, id, nil, args...)
}

// WaitEligible waits until every coordinator answers 200 with n eligible
// workers and the same PlacementVersion.
func WaitEligible(t *testing.T, timeout time.Duration, n int, coords ...*Proc) {
	t.Helper()
	testsupport.WaitFor(t, timeout, fmt.Sprintf("%d eligible workers on %d coordinators", n, len(coords)), func() bool {
		version := ""
		for _, p := range coords {
			cl, err := p.API(t).Cluster(context.Background())
			if err != nil || cl.EligibleWorkers != n || (version != "" && cl.PlacementVersion != version) {
				return false
			}
			version = cl.PlacementVersion
		}
		return true
	})
}

// WorkerKeys returns the etcd create revision of every worker record: a
// record that expired or was deleted and came back has a new one.
func (c *LiveCluster) WorkerKeys(t *testing.T) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const prefix = "/talon/clusters/it/nodes/worker/"
	resp, err := c.EtcdClient.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read worker keys: %v", err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = kv.CreateRevision
	}
	return out
}

// LeaseUIDs returns the UID of every Talon record Lease by its node
// annotation and role (not the coordinators' snapshot fences): a Lease
// deleted and created again has a new UID.
func (c *LiveCluster) LeaseUIDs(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Clientset.CoordinationV1().Leases("talon").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=talon,talon.io/role!=" + kube.FenceRole})
	if err != nil {
		t.Fatalf("list leases: %v", err)
	}
	out := map[string]string{}
	for _, l := range list.Items {
		out[l.Annotations["talon.io/role"]+"/"+l.Annotations["talon.io/node"]] = string(l.UID)
	}
	return out
}

// Changed lists the keys of before whose value differs in after or that
// after lacks, restricted to keys keep accepts.
func Changed[V comparable](before, after map[string]V, keep func(string) bool) []string {
	var out []string
	for k, v := range before {
		if keep != nil && !keep(k) {
			continue
		}
		if w, ok := after[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Sample kinds.
const (
	KindCluster = "cluster" // GET /api/v1/cluster
	KindLookup  = "lookup"  // PlacementLookup over the control protocol
)

// Sample is one answer a coordinator gave the poller.
type Sample struct {
	At    time.Time
	Coord string
	Kind  string
	// Status is the HTTP status of a cluster read (0: no answer), or 200
	// for a lookup that returned owners and 0 for one that failed.
	Status int
	// Code is the error code: an apiv1 code, a protocol code name,
	// "transport" for no answer; empty for success.
	Code     string
	Revision string // cluster reads only
	Version  string // placement version, 16 hex digits
	Eligible int    // cluster reads only
	Latency  time.Duration
}

// Target is a coordinator the poller samples.
type Target struct {
	name  string
	admin string
	ctl   string
}

// TargetOf is the poller target of coordinator p.
func TargetOf(p *Proc) Target { return Target{name: p.Name, admin: p.Admin, ctl: p.Addr} }

// Poller samples targets every PollEvery, two goroutines per target (one
// per kind) so a stopped coordinator does not delay the others, until
// stop.
type Poller struct {
	t      *testing.T
	client *tls.Config
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	samples []Sample // guarded by mu
}

// StartPoller starts polling targets with clientTLS until Stop or the end
// of the test.
func StartPoller(t *testing.T, clientTLS *tls.Config, targets ...Target) *Poller {
	t.Helper()
	pl := &Poller{t: t, client: clientTLS, stopCh: make(chan struct{})}
	for _, tg := range targets {
		api, err := apiv1.NewClient([]string{"http://" + tg.admin}, apiv1.ClientOptions{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pl.run(tg, api)
	}
	t.Cleanup(pl.Stop)
	return pl
}

// Stop stops the poller (once) and waits for its goroutines.
func (pl *Poller) Stop() {
	select {
	case <-pl.stopCh:
	default:
		close(pl.stopCh)
	}
	pl.wg.Wait()
}

func (pl *Poller) add(s Sample) {
	pl.mu.Lock()
	pl.samples = append(pl.samples, s)
	pl.mu.Unlock()
}

// Since returns the samples taken at or after from, ordered by the time
// their requests were sent (answers can arrive out of that order).
func (pl *Poller) Since(from time.Time) []Sample {
	pl.mu.Lock()
	var out []Sample
	for _, s := range pl.samples {
		if !s.At.Before(from) {
			out = append(out, s)
		}
	}
	pl.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// maxInflight bounds the requests of one kind to one coordinator that the
// poller has in flight: a coordinator that takes a request timeout to
// answer is still sampled every PollEvery.
const maxInflight = 32

// every starts f every PollEvery, each call on its own goroutine (at most
// maxInflight at once; a tick that finds them all busy is skipped), until
// stop.
func (pl *Poller) every(f func()) {
	defer pl.wg.Done()
	sem := make(chan struct{}, maxInflight)
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-pl.stopCh:
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
			pl.wg.Add(1)
			go func() {
				defer pl.wg.Done()
				defer func() { <-sem }()
				f()
			}()
		default:
		}
	}
}

// run samples tg's cluster answer and a lookup.
func (pl *Poller) run(tg Target, api *apiv1.Client) {
	// idle holds connections no lookup is using: a Conn serves one call
	// at a time.
	idle := make(chan *protocol.Conn, maxInflight)
	pl.wg.Add(2)
	go pl.every(func() { pl.add(pl.readCluster(tg, api)) })
	go func() {
		pl.every(func() {
			var cn *protocol.Conn
			select {
			case cn = <-idle:
			default:
			}
			s, cn := pl.lookup(tg, cn)
			pl.add(s)
			if cn != nil {
				idle <- cn
			}
		})
		// every returned after its calls' goroutines were started, not
		// ended; the ones still running put their connections back
		// later and close them through the cleanup below.
	}()
	pl.t.Cleanup(func() {
		for {
			select {
			case cn := <-idle:
				cn.Close()
			default:
				return
			}
		}
	})
}

func (pl *Poller) readCluster(tg Target, api *apiv1.Client) Sample {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	cl, err := api.Cluster(ctx)
	s := Sample{At: began, Coord: tg.name, Kind: KindCluster, Latency: time.Since(began)}
	var ae *apiv1.APIError
	switch {
	case err == nil:
		s.Status, s.Revision, s.Version, s.Eligible = 200, cl.Revision, cl.PlacementVersion, cl.EligibleWorkers
	case errors.As(err, &ae):
		s.Status, s.Code = ae.HTTPStatus, ae.Code
	default:
		s.Code = "transport"
	}
	return s
}

// lookup asks tg for the owner of one key over cn, dialling when cn is nil
// and dropping a connection that failed.
func (pl *Poller) lookup(tg Target, cn *protocol.Conn) (Sample, *protocol.Conn) {
	began := time.Now()
	s := Sample{At: began, Coord: tg.name, Kind: KindLookup}
	if cn == nil {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", tg.ctl, pl.client)
		if err != nil {
			s.Code, s.Latency = "transport", time.Since(began)
			return s, nil
		}
		cn = protocol.NewConn(nc, protocol.ConnOptions{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	resp, err := cn.Call(ctx, &protocol.PlacementLookup{Key: []byte("liveness/probe#0"), Replicas: 1})
	cancel()
	s.Latency = time.Since(began)
	var pe *protocol.Error
	switch {
	case err == nil:
		s.Status, s.Version = 200, apiv1.FormatU64(resp.(*protocol.PlacementResponse).Version)
	case errors.As(err, &pe):
		s.Code = pe.Code.String()
		if errors.Is(err, protocol.ErrConnBroken) { // a drain notice: the connection is done
			cn.Close()
			cn = nil
		}
	default:
		s.Code = "transport"
		cn.Close()
		cn = nil
	}
	return s, cn
}

// membership is what a 200 cluster answer says about placement.
type membership struct {
	Version  string
	Eligible int
}

// disagreement is a revision at which coordinators answered 200 with
// different memberships (or one coordinator with two).
type disagreement struct {
	Revision string
	Answers  map[string][]membership // by coordinator
}

func (d disagreement) String() string {
	var parts []string
	for c, ms := range d.Answers {
		parts = append(parts, fmt.Sprintf("%s=%v", c, ms))
	}
	sort.Strings(parts)
	return "revision " + d.Revision + ": " + strings.Join(parts, " ")
}

// Disagreements groups the 200 cluster answers of samples by revision and
// returns the revisions that carry more than one membership, among those
// that at least two coordinators answered, or that one coordinator
// answered two ways. When involving is set, only revisions at which that
// coordinator answered count.
func Disagreements(samples []Sample, involving string) (bad []disagreement, shared int) {
	byRev := map[string]map[string][]membership{}
	var order []string
	for _, s := range samples {
		if s.Kind != KindCluster || s.Status != 200 {
			continue
		}
		m := byRev[s.Revision]
		if m == nil {
			m = map[string][]membership{}
			byRev[s.Revision] = m
			order = append(order, s.Revision)
		}
		ms := membership{s.Version, s.Eligible}
		if !containsMembership(m[s.Coord], ms) {
			m[s.Coord] = append(m[s.Coord], ms)
		}
	}
	for _, rev := range order {
		m := byRev[rev]
		if involving != "" && m[involving] == nil {
			continue
		}
		var all []membership
		for _, ms := range m {
			for _, x := range ms {
				if !containsMembership(all, x) {
					all = append(all, x)
				}
			}
		}
		if len(m) >= 2 {
			shared++
		}
		if len(all) > 1 && (len(m) >= 2 || len(m[FirstKey(m)]) > 1) {
			bad = append(bad, disagreement{Revision: rev, Answers: m})
		}
	}
	return bad, shared
}

func containsMembership(ms []membership, m membership) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// FirstKey returns a key of m, "" when m is empty.
func FirstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}

// Figures summarises samples for the one-line reports of the tests.
type Figures struct {
	Attempted  int
	Failed     map[string]int // by kind/code
	MaxLatency time.Duration
	// Dropped is the number of 200 cluster answers with fewer eligible
	// workers than were alive; MaxDropped the largest shortfall.
	Dropped, MaxDropped int
	NoWorkers           int // lookups failed no_workers
	Versions            int // distinct placement versions in 200 cluster answers
}

// Summarize computes figures; alive gives the number of live workers at a
// time (nil: do not count drops).
func Summarize(samples []Sample, alive func(time.Time) int) Figures {
	f := Figures{Failed: map[string]int{}}
	versions := map[string]bool{}
	for _, s := range samples {
		f.Attempted++
		f.MaxLatency = max(f.MaxLatency, s.Latency)
		if s.Status != 200 {
			f.Failed[s.Kind+"/"+s.Code]++
			if s.Kind == KindLookup && s.Code == protocol.CodeNoWorkers.String() {
				f.NoWorkers++
			}
			continue
		}
		if s.Kind != KindCluster {
			continue
		}
		versions[s.Version] = true
		if alive != nil {
			if short := alive(s.At) - s.Eligible; short > 0 {
				f.Dropped++
				f.MaxDropped = max(f.MaxDropped, short)
			}
		}
	}
	f.Versions = len(versions)
	return f
}

// String is the one-line report of f.
func (f Figures) String() string {
	var codes []string
	for k, n := range f.Failed {
		codes = append(codes, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(codes)
	if len(codes) == 0 {
		codes = []string{"none"}
	}
	return fmt.Sprintf("attempted %d | failed %s | max latency %v | 200s naming fewer than alive %d (max short %d) | no_workers %d | versions %d",
		f.Attempted, strings.Join(codes, ","), f.MaxLatency.Round(time.Millisecond), f.Dropped, f.MaxDropped, f.NoWorkers, f.Versions)
}

// Constant returns an alive function of n.
func Constant(n int) func(time.Time) int { return func(time.Time) int { return n } }

// VersionChanges counts, per coordinator, how often the placement version
// of consecutive 200 cluster answers changed.
func VersionChanges(samples []Sample) map[string]int {
	last := map[string]string{}
	out := map[string]int{}
	for _, s := range samples {
		if s.Kind != KindCluster || s.Status != 200 {
			continue
		}
		if v, ok := last[s.Coord]; ok && v != s.Version {
			out[s.Coord]++
		}
		last[s.Coord] = s.Version
	}
	return out
}
