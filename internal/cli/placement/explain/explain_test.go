package explain

import (
	"io"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli/cmdutil"
)

func TestArgsToOptions(t *testing.T) {
	tests := []struct {
		args     []string
		key      string
		replicas int
		output   string
		err      string
	}{
		{args: []string{"k"}, key: "k", replicas: 0, output: "table"}, // 0: the cluster's placement-replicas
		{args: []string{"a/b#3", "-r", "16", "-o", "yaml"}, key: "a/b#3", replicas: 16, output: "yaml"},
		{args: []string{"k", "--replicas", "0"}, err: "--replicas 0: must be an integer from 1 to 16"},
		{args: []string{"k", "--replicas", "-2"}, err: "--replicas -2: must be an integer from 1 to 16"},
		{args: []string{"k", "-o", "wide"}, err: `--output "wide": must be one of table, json, yaml`},
		{args: []string{""}, err: "KEY of 0 bytes: must be 1 to 1024 bytes"},
		{args: []string{strings.Repeat("k", 1025)}, err: "KEY of 1025 bytes: must be 1 to 1024 bytes"},
		{args: []string{"a", "b"}, err: "explain takes 1 argument(s) (KEY), got 2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}}
			var got *ExplainOptions
			cmd := NewCmdExplain(f, func(o *ExplainOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
					t.Fatalf("error = %v (exit %d), want usage error %q", err, cmdutil.ExitCode(err), tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Key != tt.key || got.Replicas != tt.replicas || got.Output != tt.output {
				t.Errorf("options = %+v", got)
			}
		})
	}
}
