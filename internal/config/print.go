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
	if _, err := fmt.Fprintf(w, "# effective %s configuration  # source of each value\n", l.Config.Role); err != nil {
		return err
	}
	for _, s := range settings {
		if !s.appliesTo(l.Config.Role) {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: %s  # %s\n", s.name, l.display(s), l.Sources[s.name]); err != nil {
			return err
		}
	}
	return nil
}

// display renders one setting's parsed value as YAML.
func (l *Loaded) display(s setting) string {
	if s.secret {
		set := (s.name == "etcd-password" && l.Config.Etcd.Password.IsSet()) ||
			(s.name == "admin-token" && len(l.Config.Admin.Tokens) > 0)
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
