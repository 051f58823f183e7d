package config

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/format"
)

// Print writes the effective configuration as YAML, one setting a line,
// with its source as a comment. Secrets are redacted; nothing else is
// hidden.
func (l *Loaded) Print(w io.Writer) error {
	return l.PrintProblems(w, nil)
}

// PrintProblems is Print with each problem marked: after the line of
// every setting it names ("# ^ problem: ..."), and at the top, counted,
// with the ones that name no setting printed out there.
func (l *Loaded) PrintProblems(w io.Writer, problems []error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# effective %s configuration  # source of each value\n", l.Config.Role)
	if len(problems) > 0 {
		fmt.Fprintf(&b, "# INVALID: %d problem(s), marked below the settings they name\n", len(problems))
	}
	marked := make([]bool, len(problems))
	var lines []string
	for _, s := range settings {
		if !s.appliesTo(l.Config.Role) {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s  # %s\n", s.name, l.display(s), l.Sources[s.name]))
		for i, p := range problems {
			// The message names the settings at fault (and, in the
			// sources appended to it, the ones that bear on it).
			if !mentions(p.Error(), s.name) {
				continue
			}
			if marked[i] {
				lines = append(lines, fmt.Sprintf("# ^ problem %d (above)\n", i+1))
			} else {
				lines = append(lines, fmt.Sprintf("# ^ problem %d: %s\n", i+1, p.Error()))
			}
			marked[i] = true
		}
	}
	for i, p := range problems {
		if !marked[i] {
			fmt.Fprintf(&b, "# problem %d: %s\n", i+1, p.Error())
		}
	}
	for _, line := range lines {
		b.WriteString(line)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// display renders one setting's parsed value as YAML.
func (l *Loaded) display(s setting) string {
	if s.secret {
		set := (s.name == "etcd-password" && l.Config.Etcd.Password.IsSet()) ||
			(s.name == "admin-token" && l.Config.Admin.EnvToken.IsSet())
		if set {
			return strconv.Quote(redacted)
		}
		return `""`
	}
	switch v := l.values[s.name].(type) {
	case string:
		return strconv.Quote(RedactURL(v))
	case time.Duration:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.Quote(format.Bytes(uint64(v)))
	case []string:
		q := make([]string, len(v))
		for i, e := range v {
			q[i] = strconv.Quote(RedactURL(e))
		}
		return "[" + strings.Join(q, ", ") + "]"
	case map[string]string:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			parts = append(parts, strconv.Quote(k)+": "+strconv.Quote(v[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return `""`
}
