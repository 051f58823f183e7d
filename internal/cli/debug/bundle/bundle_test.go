package bundle

import (
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/cli/cmdutil"
)

func TestArgsToOptions(t *testing.T) {
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		args     []string
		output   string
		duration time.Duration
		err      string
	}{
		{args: nil, output: "talon-debug-20261101T100000Z.tar.gz", duration: 10 * time.Second},
		{args: []string{"-o", "b.tar.gz", "--duration", "0s"}, output: "b.tar.gz", duration: 0},
		{args: []string{"--duration", "-1s"}, err: "--duration -1s: must be from 0 to 10m0s"},
		{args: []string{"--duration", "11m"}, err: "--duration 11m0s: must be from 0 to 10m0s"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}, Clock: func() time.Time { return now }}
			var got *BundleOptions
			cmd := NewCmdBundle(f, func(o *BundleOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
					t.Fatalf("error = %v, want usage error %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Output != tt.output || got.Duration != tt.duration {
				t.Errorf("options = %+v", got)
			}
		})
	}
}

// TestNextPages: the node list's pages after the first are fetched by
// their continue tokens, named nodes-2.json and on, until a page without
// one.
func TestNextPages(t *testing.T) {
	pages := map[string]string{"": `{"items":[],"continue":"a"}`, "a": `{"items":[],"continue":"b"}`, "b": `{"items":[]}`}
	var names []string
	first := source{name: "nodes.json", path: "/api/v1/nodes", query: url.Values{"limit": {"1000"}}}
	nextPages([]byte(pages[""]), first, func(s source) []byte {
		names = append(names, s.name+"?"+s.query.Encode())
		return []byte(pages[s.query.Get("continue")])
	})
	want := []string{"nodes-2.json?continue=a&limit=1000", "nodes-3.json?continue=b&limit=1000"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("fetched %q; want %q", names, want)
	}
	if first.query.Get("continue") != "" {
		t.Fatal("the first page's query was changed")
	}
}
