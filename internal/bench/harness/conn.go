package harness

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talonhq/talon/internal/bench"
	"github.com/talonhq/talon/internal/cluster"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/devcluster"
	"github.com/talonhq/talon/internal/state/etcd/etcdrules"
	"github.com/talonhq/talon/internal/state/kube"
	"github.com/talonhq/talon/internal/state/kube/kuberules"
)

// Conn are the connection settings of the backends the self-contained
// benchmarks run against, under the coordinator's setting names
// (--etcd-endpoints, --kubeconfig, ...). Every run works under a prefix or
// namespace of its own, derived from Etcd.Prefix or Kube.Namespace and a
// random run ID.
type Conn struct {
	Etcd config.EtcdConfig
	Kube config.KubeConfig
	// RequestTimeout is the in-process coordinators' request-timeout.
	RequestTimeout time.Duration
	// Keep leaves what the run created (keys, leases, namespace) in place.
	Keep bool
}

// ClusterID is the cluster ID of the benchmarks' simulated clusters.
const ClusterID = "bench"

// RegisterFlags registers the connection flags on f.
func (o *Conn) RegisterFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.Etcd.Endpoints, "etcd-endpoints", []string{"127.0.0.1:2379"}, "etcd endpoints host:port or URLs, comma separated")
	f.StringVar(&o.Etcd.Prefix, "etcd-prefix", "/talon-bench", "etcd key prefix; each run works under PREFIX/run-ID and deletes it")
	f.StringVar(&o.Etcd.Username, "etcd-username", "", "etcd user name (the password comes from TALON_ETCD_PASSWORD or --etcd-password-file)")
	f.StringVar(&o.Etcd.PasswordFile, "etcd-password-file", "", "file holding the etcd password")
	f.StringVar(&o.Etcd.CAFile, "etcd-ca-file", "", "CA bundle to verify etcd's TLS certificate")
	f.StringVar(&o.Etcd.CertFile, "etcd-cert-file", "", "client certificate for etcd TLS")
	f.StringVar(&o.Etcd.KeyFile, "etcd-key-file", "", "client key for etcd TLS")
	f.DurationVar(&o.Etcd.DialTimeout, "etcd-dial-timeout", 5*time.Second, "etcd connection timeout")
	f.StringVar(&o.Kube.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	f.StringVar(&o.Kube.Namespace, "kube-namespace", "talon-bench", "namespace prefix: each run creates NAMESPACE-ID for its Leases and deletes it")
	f.IntVar(&o.Kube.QPS, "kube-qps", 400, "the coordinators' Kubernetes client queries per second (the raw phase has no limiter)")
	f.IntVar(&o.Kube.Burst, "kube-burst", 800, "the coordinators' Kubernetes client burst")
	f.DurationVar(&o.RequestTimeout, "request-timeout", 30*time.Second, "the in-process coordinators' request-timeout: long, so queueing shows as latency rather than as timeouts")
	f.BoolVar(&o.Keep, "keep", false, "keep the keys, leases and namespace the run created")
}

// Validate checks the settings the backends in use need. getenv looks up
// the environment (TALON_ETCD_PASSWORD); the etcd password is filled in
// from it or from the password file.
func (o *Conn) Validate(backends []string, getenv func(key string) string) error {
	for _, b := range backends {
		var err error
		switch b {
		case config.BackendEtcd:
			err = o.validateEtcd(getenv)
		case config.BackendKubernetes:
			err = o.validateKube()
		}
		if err != nil {
			return err
		}
	}
	if o.RequestTimeout < 100*time.Millisecond || o.RequestTimeout > time.Minute {
		return fmt.Errorf("--request-timeout %s: must be from 100ms to 1m", o.RequestTimeout)
	}
	return nil
}

func (o *Conn) validateEtcd(getenv func(key string) string) error {
	if len(o.Etcd.Endpoints) == 0 {
		return errors.New("--etcd-endpoints is empty: the etcd backend needs at least one endpoint")
	}
	for _, ep := range o.Etcd.Endpoints {
		if err := etcdrules.Endpoint(ep); err != nil {
			return fmt.Errorf("--etcd-endpoints %q: %w", config.RedactURL(ep), err)
		}
	}
	// The run works under <prefix>/run-<id>: that is the prefix the store
	// checks.
	if err := etcdrules.Prefix(o.Etcd.Prefix + "/run-" + strings.Repeat("0", runIDLen)); err != nil {
		return fmt.Errorf("--etcd-prefix %q: %w (the run works under <prefix>/run-<id>)", o.Etcd.Prefix, err)
	}
	if (o.Etcd.CertFile == "") != (o.Etcd.KeyFile == "") {
		return fmt.Errorf("--etcd-cert-file %q and --etcd-key-file %q: set both or neither", o.Etcd.CertFile, o.Etcd.KeyFile)
	}
	if o.Etcd.DialTimeout <= 0 {
		return fmt.Errorf("--etcd-dial-timeout %s: must be positive", o.Etcd.DialTimeout)
	}
	if o.Etcd.Username != "" && o.Etcd.Password == "" {
		return o.etcdPassword(getenv)
	}
	return nil
}

// etcdPassword fills in the etcd password of a user name from the
// environment or, in preference, the password file.
func (o *Conn) etcdPassword(getenv func(key string) string) error {
	o.Etcd.Password = config.Secret(getenv("TALON_ETCD_PASSWORD"))
	if o.Etcd.PasswordFile != "" {
		b, err := os.ReadFile(o.Etcd.PasswordFile)
		if err != nil {
			return fmt.Errorf("--etcd-password-file %q: %w", o.Etcd.PasswordFile, err)
		}
		o.Etcd.Password = config.Secret(strings.TrimRight(string(b), "\r\n"))
	}
	if o.Etcd.Password == "" {
		return fmt.Errorf("--etcd-username %q: needs a password from TALON_ETCD_PASSWORD or --etcd-password-file", o.Etcd.Username)
	}
	return nil
}

func (o *Conn) validateKube() error {
	if err := kuberules.NamespacePrefix(o.Kube.Namespace, runIDLen); err != nil {
		return fmt.Errorf("--kube-namespace %q: %w", o.Kube.Namespace, err)
	}
	if o.Kube.QPS < 1 || o.Kube.QPS > 100000 {
		return fmt.Errorf("--kube-qps %d: must be from 1 to 100000", o.Kube.QPS)
	}
	if o.Kube.Burst < o.Kube.QPS {
		return fmt.Errorf("--kube-burst %d: must be at least --kube-qps %d", o.Kube.Burst, o.Kube.QPS)
	}
	return nil
}

// runIDLen is the length of a run ID.
const runIDLen = 8

// runID returns a random ID naming one run's prefix and namespace.
func runID() string {
	b := make([]byte, runIDLen/2)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// runEnv is one run's place in the backends: the etcd prefix and the
// Kubernetes namespace it works under, and the raw clients.
type runEnv struct {
	opts       Conn
	id         string
	etcdPrefix string // <etcd-prefix>/run-<id>
	namespace  string // <kube-namespace>-<id>
	etcd       *clientv3.Client
	kube       kubernetes.Interface
	log        *slog.Logger
	// cleanupTimeout bounds the cleanup; zero is a minute. A fleet row
	// leaves tens of thousands of records.
	cleanupTimeout time.Duration
}

func newRunEnv(o Conn, log *slog.Logger) *runEnv {
	id := runID()
	return &runEnv{opts: o, id: id, etcdPrefix: o.Etcd.Prefix + "/run-" + id, namespace: o.Kube.Namespace + "-" + id, log: log}
}

// etcdClient connects the raw etcd client, with the coordinator's TLS and
// credentials.
func (e *runEnv) etcdClient(ctx context.Context) (*clientv3.Client, error) {
	if e.etcd != nil {
		return e.etcd, nil
	}
	c := e.opts.Etcd
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Username: c.Username, Password: c.Password.Reveal(), Context: ctx, Logger: zap.NewNop()}
	if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" {
		tc, err := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(c.Endpoints, ","), err)
	}
	// clientv3.New does not wait for a connection: one read does.
	sctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	if _, err := cli.Get(sctx, e.etcdPrefix+"/"); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(c.Endpoints, ","), err)
	}
	e.etcd = cli
	return cli, nil
}

// kubeClient connects the raw Kubernetes client (no rate limiter,
// protobuf like the store) and creates the run's namespace.
func (e *runEnv) kubeClient(ctx context.Context) (kubernetes.Interface, error) {
	if e.kube != nil {
		return e.kube, nil
	}
	var cfg *rest.Config
	var err error
	if e.opts.Kube.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", e.opts.Kube.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", e.opts.Kube.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.namespace,
		Labels: map[string]string{"app.kubernetes.io/created-by": "talon-bench"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", e.namespace, err)
	}
	e.kube = cs
	return cs, nil
}

// where names the run's place in backend b, for the output.
func (e *runEnv) where(b string) string {
	switch b {
	case config.BackendEtcd:
		return fmt.Sprintf("etcd %s, prefix %s", strings.Join(e.opts.Etcd.Endpoints, ","), e.etcdPrefix)
	case config.BackendKubernetes:
		return "Kubernetes namespace " + e.namespace
	}
	return "in-process memory store"
}

// cleanup closes e with a minute of its own (cleanupTimeout when set),
// even when ctx was cancelled (Ctrl-C), and joins its error into *err;
// callers defer it.
func (e *runEnv) cleanup(ctx context.Context, progress func(format string, a ...any), err *error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(e.cleanupTimeout, time.Minute))
	defer cancel()
	if cerr := e.close(cctx, progress); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("cleanup: %w", cerr))
	}
}

// close removes what the run created, unless Keep, and closes the
// clients. It reports what it removed on progress.
func (e *runEnv) close(ctx context.Context, progress func(format string, a ...any)) error {
	var errs []error
	if e.etcd != nil {
		if !e.opts.Keep {
			keys, leases, err := bench.CleanEtcd(ctx, e.etcd, e.etcdPrefix+"/")
			errs = append(errs, err)
			progress("cleanup: deleted %d keys under %s and revoked %d leases", keys, e.etcdPrefix, leases)
		}
		e.etcd.Close()
	}
	if e.kube != nil && !e.opts.Keep {
		api := e.kube.CoordinationV1().Leases(e.namespace)
		n := 0
		if l, err := api.List(ctx, metav1.ListOptions{}); err == nil {
			n = len(l.Items)
		}
		if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("delete the Leases of namespace %s: %w", e.namespace, err))
		}
		if err := e.kube.CoreV1().Namespaces().Delete(ctx, e.namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", e.namespace, err))
		}
		progress("cleanup: deleted %d Leases and namespace %s", n, e.namespace)
	}
	if k := e.kept(); e.opts.Keep && len(k) > 0 {
		progress("kept: %s", strings.Join(k, "; "))
	}
	return errors.Join(errs...)
}

func (e *runEnv) kept() []string {
	var out []string
	if e.etcd != nil {
		out = append(out, "etcd keys and leases under "+e.etcdPrefix)
	}
	if e.kube != nil {
		out = append(out, "Kubernetes namespace "+e.namespace)
	}
	return out
}

// coordinatorConfig returns the configuration of in-process coordinator
// nodeID on backend b under the run's prefix or namespace, for records
// records; edit, when not nil, changes it before it is validated.
func (e *runEnv) coordinatorConfig(b, nodeID string, records int, edit func(c *config.Config)) (*config.Config, error) {
	return devcluster.Config(cluster.RoleCoordinator, nodeID, "127.0.0.1", func(c *config.Config) {
		c.ClusterID = ClusterID
		c.AdminListen = ""
		c.StateBackend = b
		c.HeartbeatInterval, c.UnhealthyAfter, c.LeaseTTL = HeartbeatInterval, time.Minute, 2*time.Minute
		c.StatusInterval = cluster.DefaultStatusInterval // production: one status write in 12 heartbeats
		c.RequestTimeout = e.opts.RequestTimeout
		c.Limits.MaxRecords = records + 64
		c.Limits.NodeWritesPerInterval = 0 // writers heartbeat back to back
		c.Limits.MaxConnections = max(c.Limits.MaxConnections, records+256)
		c.Etcd = e.opts.Etcd
		c.Etcd.Prefix = e.etcdPrefix + "/talon"
		c.Etcd.CompactionInterval = 0 // a benchmark never compacts the operator's etcd (compaction is global to it)
		// The connection settings come from the bench's flags; write
		// admission keeps the coordinator's defaults.
		c.Kube.Kubeconfig, c.Kube.QPS, c.Kube.Burst = e.opts.Kube.Kubeconfig, e.opts.Kube.QPS, e.opts.Kube.Burst
		c.Kube.Namespace = e.namespace
		c.LogLevel = "error"
		if edit != nil {
			edit(c)
		}
	})
}

// talonLeases counts the record Leases Talon's store holds in the run's
// namespace (not the coordinators' snapshot fences).
func (e *runEnv) talonLeases(ctx context.Context) (int, error) {
	l, err := e.kube.CoordinationV1().Leases(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelManagedBy + "=" + kube.ManagedByValue + "," + kube.LabelRole + "!=" + kube.FenceRole})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}
