package talontest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli"
)

// Ctl runs talonctl in-process against the given servers.
func Ctl(t *testing.T, servers []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cli.Factory{
		IO: cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, ColorProfile: colorprofile.NoTTY},
		Environ: []string{"XDG_CONFIG_HOME=" + t.TempDir(), "TALONCTL_SERVER=" + strings.Join(servers, ","),
			"TALONCTL_TOKEN=" + OpsToken},
		Clock: time.Now,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = cli.Main(ctx, args, f)
	return code, out.String(), errOut.String()
}

// OpsToken is talonctl's token in TestOperatorWorkflows, MetricsToken
// Prometheus's.
const (
	OpsToken     = "ops-token-4b1e9c07d2"
	MetricsToken = "metrics-token-9a30f1"
)

// Post sends a write to a process's admin listener with the token and
// headers given, and returns the status and body.
func Post(t *testing.T, p *Proc, path, token string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.Admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// OpsAPI is a client of a process's admin listener with OpsToken.
func OpsAPI(t *testing.T, p *Proc) *apiv1.Client {
	t.Helper()
	return WorkerAPI(t, p)
}

// WorkerAPI is a client of a worker's admin listener with OpsToken.
func WorkerAPI(t *testing.T, p *Proc) *apiv1.Client {
	t.Helper()
	c, err := apiv1.NewClient([]string{"http://" + p.Admin}, apiv1.ClientOptions{Timeout: 2 * time.Second, Token: OpsToken})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// EligibleOn returns the eligible workers of a coordinator's placement
// (the candidates of any key are every eligible worker).
func EligibleOn(t *testing.T, p *Proc) []string {
	t.Helper()
	pl, err := OpsAPI(t, p).Placement(context.Background(), "k", 1)
	if err != nil {
		return nil
	}
	var ids []string
	for _, c := range pl.Candidates {
		ids = append(ids, c.NodeID)
	}
	slices.Sort(ids)
	return ids
}
