package talontest

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads a Prometheus text page into series (name{labels} as
// written) and, for labelled series, their sum by name; nil on failure.
func Scrape(url string) map[string]float64 {
	return ScrapeWith(&http.Client{Timeout: 5 * time.Second}, url)
}

// ScrapeWith is scrape through hc.
func ScrapeWith(hc *http.Client, url string) map[string]float64 {
	resp, err := hc.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		out[series] = v
		if name, _, ok := strings.Cut(series, "{"); ok {
			out[name] += v
		}
	}
	return out
}

// ScrapeGauge returns the value of a metric without labels (or the first
// series) from a process's /metrics.
func ScrapeGauge(t *testing.T, p *Proc, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f := fams[name]
	if f == nil || len(f.GetMetric()) == 0 {
		t.Fatalf("%s not exported by %s", name, p.Name)
	}
	m := f.GetMetric()[0]
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetUntyped().GetValue()
}

// ScrapeText returns p's /metrics in the Prometheus text format.
func ScrapeText(t *testing.T, p *Proc) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}

// GrepLines returns the lines of s that contain sub.
func GrepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// SumMetric adds the values of every sample of name (exactly, labels
// aside) whose labels contain each of want, in Prometheus text format.
func SumMetric(raw []byte, name string, want ...string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}
