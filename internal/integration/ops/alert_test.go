package ops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/talonhq/talon/internal/testsupport"
	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// promtoolBin returns promtool (TALON_PROMTOOL, set by make test from
// .ci/ensure-tool.sh, or PATH).
func promtoolBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALON_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run make test (it installs it) or set TALON_PROMTOOL")
	}
	return p
}

// TestWorkerLostAlertFires kills a worker with SIGKILL and checks that
// TalonWorkerLost's expression, evaluated by promtool over the values
// scraped from the real coordinator before and after, holds and makes the
// alert fire after its for window (the old TalonWorkersUnhealthy could
// never fire for a dead worker: its record expired before the 5 minutes).
func TestWorkerLostAlertFires(t *testing.T) {
	talontest.SkipShort(t)
	rules, err := os.ReadFile("../../../deploy/prometheus/talon-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
				For   string `json:"for"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	var expr, forWindow string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "TalonWorkerLost" {
				expr, forWindow = r.Expr, r.For
			}
		}
	}
	if expr == "" {
		t.Fatal("no TalonWorkerLost alert in deploy/prometheus/talon-alerts.yaml")
	}

	blobs := t.TempDir()
	ctl := talontest.FreeAddr(t)
	coord := talontest.Start(t, "coordinator", talontest.CoordinatorArgs("coord", ctl, talontest.FreeAddr(t))...)
	testsupport.WaitFor(t, 20*time.Second, "coordinator ready", func() bool { return talontest.Ready(t, coord) })
	var workers []*talontest.Proc
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("worker-%d", i)
		workers = append(workers, talontest.Start(t, id, talontest.WorkerArgs(id, talontest.FreeAddr(t), talontest.FreeAddr(t), []string{ctl}, blobs, t.TempDir())...))
	}
	testsupport.WaitFor(t, 20*time.Second, "two eligible workers", func() bool {
		c, err := coord.API(t).Cluster(context.Background())
		return err == nil && c.EligibleWorkers == 2
	})
	before := talontest.ScrapeGauge(t, coord, "talon_placement_eligible_workers")
	readyBefore := talontest.ScrapeGauge(t, coord, "talon_ready")

	workers[1].Kill()
	killed := time.Now()
	testsupport.WaitFor(t, 20*time.Second, "the coordinator's gauge drops", func() bool {
		return talontest.ScrapeGauge(t, coord, "talon_placement_eligible_workers") < before
	})
	t.Logf("eligible workers dropped %s after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	after := talontest.ScrapeGauge(t, coord, "talon_placement_eligible_workers")
	readyAfter := talontest.ScrapeGauge(t, coord, "talon_ready")

	// Evaluate the alert's expression with promtool over the scraped
	// values: an hour before the loss at one sample a minute, then 20
	// minutes after it.
	dir := t.TempDir()
	rule := fmt.Sprintf("groups:\n  - name: under-test\n    rules:\n      - alert: WorkerLostUnderTest\n        expr: |\n%s        for: %s\n",
		indent(expr, "          "), forWindow)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	series := func(name string, b, a float64) string {
		return fmt.Sprintf("      - series: '%s{job=\"talon-coordinator\",instance=\"coord:7401\"}'\n        values: '%gx60 %gx20'\n", name, b, a)
	}
	test := "rule_files: [rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		series("talon_placement_eligible_workers", before, after) + series("talon_ready", readyBefore, readyAfter) +
		"    alert_rule_test:\n" +
		"      - eval_time: 59m\n        alertname: WorkerLostUnderTest\n        exp_alerts: []\n" +
		"      - eval_time: 75m\n        alertname: WorkerLostUnderTest\n        exp_alerts:\n          - exp_labels: {}\n"
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtoolBin(t), "test", "rules", filepath.Join(dir, "test.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("TalonWorkerLost over the scraped samples (eligible %g -> %g, ready %g -> %g): %v\n%s\n%s", before, after, readyBefore, readyAfter, err, out, test)
	}
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
	return b.String()
}
