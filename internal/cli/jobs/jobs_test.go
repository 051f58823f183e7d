package jobs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// TestParseTargets: a trailing '/' or '*' makes a prefix; bad arguments
// are usage errors that name the limit.
func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		args              []string
		objects, prefixes []string
		err               string
	}{
		{[]string{"a/b.bin", "ds/", "logs/2026-*"}, []string{"a/b.bin"}, []string{"ds/", "logs/2026-"}, ""},
		{[]string{"*"}, nil, nil, "empty prefix"},
		{[]string{strings.Repeat("k", 1025)}, nil, nil, "at most 1024"},
		{[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}, nil, nil, "at most 8"},
	} {
		var o StartOptions
		err := o.parseTargets(tc.args)
		var ee *cmdutil.ExitError
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage):
			t.Errorf("%q: %v; want a usage error containing %q", tc.args, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(o.Objects, tc.objects) || !slices.Equal(o.Prefixes, tc.prefixes)):
			t.Errorf("%q: objects %q prefixes %q, %v; want %q %q", tc.args, o.Objects, o.Prefixes, err, tc.objects, tc.prefixes)
		}
	}
}
