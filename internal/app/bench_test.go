package app

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/bench/harness"
)

func TestBenchFlagsAreUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no backend", []string{"bench", "heartbeats"}, "--backend is required: etcd or kubernetes"},
		{"memory backend", []string{"bench", "heartbeats", "--backend", "memory"}, `--backend "memory": must be etcd or kubernetes`},
		{"writers negative", []string{"bench", "heartbeats", "--backend", "etcd", "--writers", "-1"}, "--writers -1: must be from 1 to 10000"},
		{"writers too many", []string{"bench", "heartbeats", "--backend", "kubernetes", "--writers", "10001"}, "--writers 10001: must be from 1 to 10000"},
		{"writers not a number", []string{"bench", "heartbeats", "--backend", "etcd", "--writers", "many"}, `invalid argument "many" for "--writers"`},
		{"no coordinators", []string{"bench", "heartbeats", "--backend", "etcd", "--coordinators-count", "0"}, "--coordinators-count 0: must be from 1 to 16"},
		{"too many coordinators", []string{"bench", "heartbeats", "--backend", "etcd", "--coordinators-count", "17"}, "--coordinators-count 17: must be from 1 to 16"},
		{"short duration", []string{"bench", "heartbeats", "--backend", "etcd", "--duration", "500ms"}, "--duration 500ms: must be from 1s to 1h"},
		{"output", []string{"bench", "heartbeats", "--backend", "etcd", "-o", "yaml"}, `--output "yaml": must be text or json`},
		{"pairs", []string{"bench", "heartbeats", "--backend", "etcd", "--pairs", "0"}, "--pairs 0: must be from 1 to 20"},
		{"mix", []string{"bench", "heartbeats", "--backend", "etcd", "--mix", "renewals"}, `--mix "renewals": must be renew, write or both`},
		{"status interval", []string{"bench", "heartbeats", "--backend", "kubernetes", "--status-interval", "2s"}, "--status-interval 2s: must be 0 (every heartbeat writes the record) or from the heartbeat interval 5s to 1h"},
		{"lookups pairs", []string{"bench", "lookups", "--backend", "memory", "--pairs", "21"}, "--pairs 21: must be from 1 to 20"},
		{"etcd prefix", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-prefix", "talon/"}, `--etcd-prefix "talon/": must start with "/"`},
		{"etcd endpoint", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-endpoints", "localhost"}, `--etcd-endpoints "localhost": must be host:port or an http, https, unix or unixs URL`},
		{"etcd cert without key", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-cert-file", "c.pem"}, `--etcd-cert-file "c.pem" and --etcd-key-file "": set both or neither`},
		{"etcd user without password", []string{"bench", "heartbeats", "--backend", "etcd", "--etcd-username", "u"}, `--etcd-username "u": needs a password from TALON_ETCD_PASSWORD or --etcd-password-file`},
		{"kube namespace", []string{"bench", "heartbeats", "--backend", "kubernetes", "--kube-namespace", "Bench_NS"}, `--kube-namespace "Bench_NS": must be a DNS-1123 label`},
		{"kube namespace too long for the run", []string{"bench", "heartbeats", "--backend", "kubernetes", "--kube-namespace", strings.Repeat("a", 55)}, `must be at most 54 characters (the run adds a 9-character suffix)`},
		{"kube burst", []string{"bench", "heartbeats", "--backend", "kubernetes", "--kube-qps", "100", "--kube-burst", "10"}, "--kube-burst 10: must be at least --kube-qps 100"},
		{"request timeout", []string{"bench", "heartbeats", "--backend", "etcd", "--request-timeout", "10ms"}, "--request-timeout 10ms: must be from 100ms to 1m"},
		{"lookups backend", []string{"bench", "lookups", "--backend", "consul"}, `--backend "consul": must be memory, etcd or kubernetes`},
		{"lookups backend twice", []string{"bench", "lookups", "--backend", "memory", "--backend", "memory"}, `--backend "memory": given twice`},
		{"lookups backend and coordinators", []string{"bench", "lookups", "--backend", "memory", "--coordinators", "127.0.0.1:7400"}, "--coordinators and --backend: --backend starts its own coordinators; give one or the other"},
		{"lookups backend and dir", []string{"bench", "lookups", "--backend", "memory", "--dir", "/tmp"}, "--dir and --backend"},
		{"lookups workers", []string{"bench", "lookups", "--backend", "memory", "--workers", "0"}, "--workers 0: must be from 1 to 10000"},
		{"lookups replicas over workers", []string{"bench", "lookups", "--backend", "memory", "--workers", "2", "--replicas", "3"}, "--replicas 3: must be at most --workers 2"},
		{"lookups concurrency", []string{"bench", "lookups", "--backend", "memory", "--concurrency", "0"}, "--concurrency 0: must be from 1 to 1024"},
		{"lookups output", []string{"bench", "lookups", "--insecure-control-plane", "-o", "csv"}, `--output "csv": must be text or json`},
		{"fleet workers", []string{"bench", "fleet", "--workers", "0"}, "--workers 0: must be from 1 to 10000 (one connection each; start more fleets for more)"},
		{"fleet workers too many", []string{"bench", "fleet", "--workers", "10001"}, "--workers 10001: must be from 1 to 10000"},
		{"fleet interval", []string{"bench", "fleet", "--interval", "500ms"}, "--interval 500ms: must be from 1s to 1m0s"},
		{"fleet interval long", []string{"bench", "fleet", "--interval", "2m"}, "--interval 2m0s: must be from 1s to 1m0s"},
		{"fleet duration", []string{"bench", "fleet", "--duration", "100ms"}, "--duration 100ms: must be 0 (until SIGINT or SIGTERM) or from 1s to 24h0m0s"},
		{"fleet output", []string{"bench", "fleet", "-o", "yaml"}, `--output "yaml": must be text or json`},
		{"fleet coordinators", []string{"bench", "fleet", "--coordinators", "localhost"}, `--coordinators "localhost": must be host:port`},
		{"fleet no coordinators", []string{"bench", "fleet", "--coordinators", ""}, "--coordinators is empty"},
		{"fleet node prefix", []string{"bench", "fleet", "--node-prefix", "-x"}, `--node-prefix "-x00000": must start with a letter or digit`},
		{"fleet source address", []string{"bench", "fleet", "--source-address", "lo"}, `--source-address "lo": must be an IP address of this host`},
		{"fleet cluster id", []string{"bench", "fleet", "--cluster-id", "a/b"}, `--cluster-id "a/b": has '/' at byte 1`},
		{"heartbeats fleet size", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "0"}, "--fleet 0: each size must be from 1 to 50000"},
		{"heartbeats fleet size too big", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "1000,50001"}, "--fleet 50001: each size must be from 1 to 50000"},
		{"heartbeats fleet not a number", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "1k"}, `invalid argument "1k" for "--fleet"`},
		{"heartbeats fleet interval", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "100", "--interval", "0s"}, "--interval 0s: must be from 1s to 1m0s"},
		{"heartbeats fleet duration", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "100", "--duration", "9s"}, "--duration 9s: with --fleet must be at least twice --interval 5s"},
		{"heartbeats fleet lookup rate", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "100", "--lookup-rate", "-1"}, "--lookup-rate -1: must be from 0 (none) to 10000"},
		{"heartbeats fleet pairs", []string{"bench", "heartbeats", "--backend", "etcd", "--fleet", "100", "--pairs", "2"}, "--pairs and --fleet"},
		{"heartbeats fleet backend", []string{"bench", "heartbeats", "--backend", "memory", "--fleet", "100", "--duration", "10s"}, `--backend "memory": must be etcd or kubernetes`},
		{"raw streams", []string{"bench", "heartbeats", "--backend", "etcd", "--raw-streams", "-1"}, "--raw-streams -1: must be from 0 (a stream per writer) to --writers 1000"},
		{"raw streams over writers", []string{"bench", "heartbeats", "--backend", "etcd", "--writers", "10", "--raw-streams", "11"}, "--raw-streams 11: must be from 0 (a stream per writer) to --writers 10"},
		{"raw streams on kubernetes", []string{"bench", "heartbeats", "--backend", "kubernetes", "--raw-streams", "4"}, "--raw-streams 4: only with --backend etcd (lease keepalive streams)"},
		{"heartbeats interval without fleet", []string{"bench", "heartbeats", "--backend", "etcd", "--interval", "1s"}, "--interval: only with --fleet"},
		{"heartbeats lookup rate without fleet", []string{"bench", "heartbeats", "--backend", "etcd", "--lookup-rate", "5"}, "--lookup-rate: only with --fleet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != ExitUsage || stdout != "" || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "--help' for usage") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestBenchLookupsMemoryBackend runs the self-contained mode end to end on
// the memory backend (the etcd and Kubernetes runs are integration tests).
func TestBenchLookupsMemoryBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a coordinator")
	}
	code, stdout, stderr := run(t, nil, "bench", "lookups", "--backend", "memory", "--workers", "50", "--duration", "1s", "--concurrency", "4", "--pairs", "1", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep harness.LookupsReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("output %q: %v", stdout, err)
	}
	// Memory alone: the limit's phases only (pairs+1), no ratio.
	if len(rep.Backends) != 1 || rep.Backends[0].Backend != "memory" || rep.Backends[0].Lookups.PerSecond <= 0 || rep.Backends[0].RatioToMemory != nil ||
		rep.Workers != 50 || rep.Pairs != 1 || len(rep.Backends[0].Phases) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stderr, "lookups on memory: seeding 50 worker records") {
		t.Fatalf("progress %q", stderr)
	}
}
