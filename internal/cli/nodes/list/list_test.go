package list

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

func parse(t *testing.T, args ...string) (*ListOptions, error) {
	t.Helper()
	f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}}
	var got *ListOptions
	cmd := NewCmdList(f, func(o *ListOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		return nil, err
	}
	return got, nil
}

func TestFlagsToOptions(t *testing.T) {
	tru, fals := true, false
	tests := []struct {
		name     string
		args     []string
		role     string
		health   string
		ready    *bool
		selector string
		fields   string
		output   string
		sortBy   string
		watch    bool
		interval time.Duration
	}{
		{name: "defaults", output: "table", interval: DefaultInterval},
		{name: "filters", args: []string{"--role", "worker", "--health", "degraded", "--ready", "-l", "zone=a,tier=ssd", "-l", "rack=7"},
			role: "worker", health: "degraded", ready: &tru, selector: "rack=7,tier=ssd,zone=a", output: "table", interval: DefaultInterval},
		{name: "set-based selectors", args: []string{"-l", "zone in (a,b),!spot", "--selector", "tier!=hdd", "-l", "rack"},
			selector: "rack,!spot,tier!=hdd,zone in (a,b)", output: "table", interval: DefaultInterval},
		{name: "field selector", args: []string{"--field-selector", "role=worker,health!=healthy,ready==true"},
			fields: "health!=healthy,ready=true,role=worker", output: "table", interval: DefaultInterval},
		{name: "sort descending", args: []string{"--sort-by=-capacity"}, sortBy: "-capacity", output: "table", interval: DefaultInterval},
		{name: "not ready", args: []string{"--ready=false"}, ready: &fals, output: "table", interval: DefaultInterval},
		{name: "output and watch", args: []string{"-o", "wide", "--sort-by", "age", "-w", "--interval", "5s"},
			output: "wide", sortBy: "age", watch: true, interval: 5 * time.Second},
		{name: "same label twice", args: []string{"-l", "zone=a", "-l", "zone=a"}, selector: "zone=a,zone=a", output: "table", interval: DefaultInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			f := o.Filter
			if f.Role != tt.role || f.Health != tt.health || f.LabelSelector != tt.selector || f.Labels != nil {
				t.Errorf("filter = %+v", f)
			}
			if got := fmt.Sprint(o.Fields); (o.Fields == nil) != (tt.fields == "") || (o.Fields != nil && got != tt.fields) {
				t.Errorf("field selector = %q, want %q", got, tt.fields)
			}
			if (f.Ready == nil) != (tt.ready == nil) || (f.Ready != nil && *f.Ready != *tt.ready) {
				t.Errorf("ready = %v, want %v", f.Ready, tt.ready)
			}
			if o.Output != tt.output || o.SortBy != tt.sortBy || o.Watch != tt.watch || o.Interval != tt.interval {
				t.Errorf("options = %+v", o)
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--role", "boss"}, `--role "boss": must be one of coordinator, worker`},
		{[]string{"--health", "fine"}, `--health "fine": must be one of healthy, degraded, unhealthy, unknown`},
		{[]string{"-o", "xml"}, `--output "xml": must be one of table, wide, json, yaml, name, or KIND=TEMPLATE with KIND one of jsonpath, jsonpath-file, go-template, go-template-file, custom-columns, custom-columns-file`},
		{[]string{"-o", "jsonpath={.items["}, `--output "jsonpath={.items[": jsonpath: unterminated array`},
		{[]string{"-o", "go-template={{.items"}, `--output "go-template={{.items": template: output:1: unclosed action`},
		{[]string{"-o", "custom-columns=NODE"}, `--output "custom-columns=NODE": column "NODE": must be HEADER:JSONPATH`},
		{[]string{"-o", "jsonpath="}, `--output "jsonpath=": the template is empty`},
		{[]string{"-o", "wide=x"}, `--output "wide=x": "wide" takes no argument; KIND=... is one of jsonpath, jsonpath-file, go-template, go-template-file, custom-columns, custom-columns-file`},
		{[]string{"-o", "custom-columns-file=/nonexistent/cols"}, `--output "custom-columns-file=/nonexistent/cols": open /nonexistent/cols: no such file or directory`},
		{[]string{"--sort-by", "size"}, `--sort-by "size": must be a JSONPath such as .capacity.residentBytes, or one of name, role, health, ready, age, version, address, uptime, capacity, resident, hit-ratio; optionally with a leading - to reverse the order`},
		{[]string{"--sort-by", "--name"}, `--sort-by "--name": must be a JSONPath such as .capacity.residentBytes, or one of name, role, health, ready, age, version, address, uptime, capacity, resident, hit-ratio; optionally with a leading - to reverse the order`},
		{[]string{"-l", "=x"}, `--selector "=x": ` + apiv1.LabelSelectorRule + ` (found '=', expected: !, identifier, or 'end of string')`},
		{[]string{"-l", "zone in (a"}, `--selector "zone in (a": ` + apiv1.LabelSelectorRule + ` (unable to parse requirement: found '', expected: ',' or ')')`},
		{[]string{"-l", "zone=a", "-l", "x y"}, `--selector "zone=a,x y": ` + apiv1.LabelSelectorRule + ` (unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt)`},
		{[]string{"--field-selector", "zone=a"}, `--field-selector "zone=a": field "zone" is not supported; supported fields: nodeId, role, health, ready, version, address`},
		{[]string{"--field-selector", "role"}, `--field-selector "role": must be field=value, field==value or field!=value, comma-joined (invalid selector: 'role'; can't understand 'role')`},
		{[]string{"--field-selector", "role=boss"}, `--field-selector "role=boss": role value "boss": must be one of coordinator, worker`},
		{[]string{"--field-selector", "ready!=yes"}, `--field-selector "ready!=yes": ready value "yes": must be one of true, false`},
		{[]string{"-w", "--interval", "-1s"}, "--interval -1s: must be positive"},
		{[]string{"extra"}, `list takes no arguments, got ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := parse(t, tt.args...)
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Fatalf("error %v: exit %d, want usage", err, cmdutil.ExitCode(err))
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
		})
	}
}
