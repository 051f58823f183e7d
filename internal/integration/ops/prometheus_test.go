package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// prometheusBin returns Debian's prometheus server (TALON_PROMETHEUS, set
// by make test from .ci/ensure-tool.sh, or PATH).
func prometheusBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALON_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: run make test (it installs Debian's prometheus package with .ci/ensure-tool.sh) or set TALON_PROMETHEUS")
	}
	return p
}

// timeScale is how much faster than production the live test runs the
// shipped rules: every "for" and subquery step is divided by it (5m
// becomes 5s, [1h:1m] becomes [1h:1s]); expressions are otherwise as
// shipped.
const timeScale = 60

// scaledRules reads the shipped alert rules and rewrites their durations
// for a test that scrapes and evaluates every second.
func scaledRules(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/prometheus/talon-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf map[string]any
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rf["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			if f, ok := rule["for"].(string); ok {
				d, err := model.ParseDuration(f)
				if err != nil {
					t.Fatalf("%s: for %q: %v", rule["alert"], f, err)
				}
				rule["for"] = scaleDuration(time.Duration(d))
			}
			expr := rule["expr"].(string)
			for _, step := range []string{"1m", "5m"} {
				expr = strings.ReplaceAll(expr, ":"+step+"]", ":"+scaleDuration(mustDuration(t, step))+"]")
			}
			rule["expr"] = expr
			n++
		}
	}
	if n == 0 {
		t.Fatal("no rules in talon-alerts.yaml")
	}
	out, err := yaml.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scaleDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int(d/timeScale/time.Second)))
}

func mustDuration(t *testing.T, s string) time.Duration {
	d, err := model.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(d)
}

// promServer is a Prometheus server process under test.
type promServer struct {
	addr string
	out  *testsupport.SyncBuffer
}

// alert is one entry of Prometheus's /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

func (a alert) String() string {
	keys := make([]string, 0, len(a.Labels))
	for k := range a.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q ", k, a.Labels[k])
	}
	return fmt.Sprintf("%s{%s} value %s", a.State, strings.TrimSpace(b.String()), a.Value)
}

// alerts returns the pending and firing alerts (callable from any
// goroutine: it reports errors instead of failing the test).
func (p *promServer) alerts() ([]alert, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/v1/alerts", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Status != "success" {
		return nil, fmt.Errorf("prometheus /api/v1/alerts: status %q, %v", body.Status, err)
	}
	return body.Data.Alerts, nil
}

// startPrometheus runs Prometheus scraping targets (job -> cluster ->
// admin addresses) every second with the shipped rules, time-scaled.
func startPrometheus(t *testing.T, targets map[string]map[string][]string) *promServer {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), scaledRules(t), 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n")
	for _, job := range []string{"talon-coordinator", "talon-worker"} {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n", job)
		for cl, addrs := range targets[job] {
			list, _ := json.Marshal(addrs) // a JSON list is a YAML list
			fmt.Fprintf(&cfg, "      - targets: %s\n        labels: {talon_cluster: %q}\n", list, cl)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &promServer{addr: talontest.FreeAddr(t), out: &testsupport.SyncBuffer{}}
	cmd := exec.Command(prometheusBin(t), "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+p.addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("--- prometheus.yml ---\n%s\n--- output of prometheus ---\n%s", cfg.String(), talontest.Tail(p.out.String(), 4000))
		}
	})
	testsupport.WaitFor(t, 60*time.Second, "prometheus ready", func() bool {
		res, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}

// TestAlertsLivePrometheus runs Debian's Prometheus server scraping two
// real clusters (one coordinator and two workers each) with the shipped
// rules, their durations divided by 60. It SIGKILLs a worker of cluster b
// and checks that TalonWorkerDown fires for that worker with its node ID
// and TalonWorkerLost for cluster b with the number lost, and that nothing
// is pending or firing for cluster a at any point of the run (from the
// first scrape of every target on).
func TestAlertsLivePrometheus(t *testing.T) {
	talontest.SkipShort(t)
	prometheusBin(t) // fail before starting anything
	type clusterProcs struct {
		coord   *talontest.Proc
		workers []*talontest.Proc
	}
	clusters := map[string]*clusterProcs{}
	targets := map[string]map[string][]string{"talon-coordinator": {}, "talon-worker": {}}
	blobs := t.TempDir()
	for _, cl := range []string{"a", "b"} {
		ctl := talontest.FreeAddr(t)
		c := &clusterProcs{coord: talontest.Start(t, cl+"-coord", talontest.CoordinatorArgs(cl+"-coord", ctl, talontest.FreeAddr(t), "--cluster-id", cl)...)}
		for i := 1; i <= 2; i++ {
			id := fmt.Sprintf("%s-worker-%d", cl, i)
			c.workers = append(c.workers, talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir(), "--cluster-id", cl)...))
		}
		clusters[cl] = c
		targets["talon-coordinator"][cl] = []string{c.coord.Admin}
		for _, w := range c.workers {
			targets["talon-worker"][cl] = append(targets["talon-worker"][cl], w.Admin)
		}
	}
	for cl, c := range clusters {
		testsupport.WaitFor(t, 30*time.Second, "cluster "+cl+": two eligible workers", func() bool {
			s, err := c.coord.API(t).Cluster(context.Background())
			return talontest.Ready(t, c.coord) && err == nil && s.EligibleWorkers == 2
		})
	}
	t.Log("two clusters ready; starting prometheus")
	prom := startPrometheus(t, targets)
	// Prometheus evaluates rules before its first scrape (discovery hands
	// out targets after about 5 s), and absent(up == 1) is then true by
	// construction: with "for" scaled from 2m to 2s, TalonCoordinatorsDown
	// fires for that moment (the shipped 2m absorbs it). The run starts once
	// every target has been scraped and that has cleared.
	testsupport.WaitFor(t, 30*time.Second, "prometheus scraping every target", func() bool {
		return strings.Contains(queryOnce(t, prom, `count(up == 1) == 6`), `"value"`)
	})
	testsupport.WaitFor(t, 30*time.Second, "no alert with both clusters healthy", func() bool {
		as, err := prom.alerts()
		return err == nil && len(as) == 0
	})

	// Watch every alert for the whole run: none may concern cluster a, and
	// every one must name its cluster.
	var (
		mu       sync.Mutex
		healthy  []string
		firing   = map[string]alert{}
		apiError error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			as, err := prom.alerts()
			if err != nil {
				mu.Lock()
				apiError = err
				mu.Unlock()
			}
			for _, a := range as {
				mu.Lock()
				if a.Labels["talon_cluster"] != "b" {
					healthy = append(healthy, a.String())
				}
				if a.State == "firing" {
					firing[a.Labels["alertname"]] = a
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stopWatch := func() { once.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopWatch)
	seen := func(name string) (alert, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := firing[name]
		return a, ok
	}

	// A settle period with both clusters healthy: longer than any scaled
	// "for" of a rule that could misfire on a healthy cluster (5m -> 5s).
	time.Sleep(8 * time.Second)
	mu.Lock()
	if len(firing) != 0 {
		t.Errorf("alerts fire on two healthy clusters: %v", firing)
	}
	mu.Unlock()

	victim := clusters["b"].workers[1]
	victim.Kill()
	killed := time.Now()
	t.Logf("SIGKILLed %s (%s)", victim.Name, victim.Admin)
	var down, lost alert
	testsupport.WaitFor(t, 60*time.Second, "TalonWorkerDown and TalonWorkerLost firing", func() bool {
		var ok1, ok2 bool
		down, ok1 = seen("TalonWorkerDown")
		lost, ok2 = seen("TalonWorkerLost")
		return ok1 && ok2
	})
	t.Logf("both firing %s after the SIGKILL: %s; %s", time.Since(killed).Round(100*time.Millisecond), down, lost)
	// Keep watching cluster a a little longer while b is broken.
	time.Sleep(3 * time.Second)
	stopWatch()

	for k, want := range map[string]string{"talon_cluster": "b", "job": "talon-worker", "instance": victim.Admin, "node_id": victim.Name, "severity": "ticket"} {
		if down.Labels[k] != want {
			t.Errorf("TalonWorkerDown label %s = %q, want %q (%s)", k, down.Labels[k], want, down)
		}
	}
	for k, want := range map[string]string{"talon_cluster": "b", "severity": "page"} {
		if lost.Labels[k] != want {
			t.Errorf("TalonWorkerLost label %s = %q, want %q (%s)", k, lost.Labels[k], want, lost)
		}
	}
	if v, err := strconv.ParseFloat(lost.Value, 64); err != nil || v != 1 {
		t.Errorf("TalonWorkerLost value %q, want 1 (one worker lost)", lost.Value)
	}
	mu.Lock()
	defer mu.Unlock()
	if apiError != nil {
		t.Errorf("reading prometheus's alerts: %v", apiError)
	}
	if len(healthy) > 0 {
		t.Errorf("alerts pending or firing outside cluster b (%d samples), e.g. %s", len(healthy), strings.Join(healthy[:min(5, len(healthy))], "; "))
	}
}

// queryOnce runs an instant PromQL query and returns the raw JSON answer
// ("" when Prometheus does not answer).
func queryOnce(t *testing.T, p *promServer, q string) string {
	t.Helper()
	res, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
