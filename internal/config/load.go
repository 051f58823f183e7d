package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/cluster"
)

// delim separates nested keys inside koanf. Setting names never contain
// it, and neither do label keys, which may contain dots.
const delim = "::"

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("invalid configuration")

// Source says where a setting's effective value came from.
type Source struct {
	Layer  string // "default", "file", "env" or "flag"
	Detail string // the file path, the variable or the flag
}

func (s Source) String() string {
	if s.Detail == "" {
		return s.Layer
	}
	return s.Layer + " " + s.Detail
}

// Options tells Load where to look.
type Options struct {
	// ConfigFile is a YAML file; empty means none.
	ConfigFile string
	// Environ is the environment as KEY=VALUE strings (os.Environ()).
	Environ []string
	// Flags holds the command's flags (registered with RegisterFlags); only
	// flags the user set are applied.
	Flags *pflag.FlagSet
}

// Loaded is a loaded configuration with the source of every setting.
type Loaded struct {
	Config  *Config
	Sources map[string]Source // by setting name
	values  map[string]any    // parsed value by setting name, for Print
}

// Load builds the configuration of role from defaults, the config file,
// the environment and the flags, in increasing precedence, then validates
// it. Secrets are read from the environment and from the files named by
// settings.
func Load(role cluster.Role, opts Options) (*Loaded, error) {
	k := koanf.New(delim)
	sources := map[string]Source{}

	// Defaults.
	defaults := map[string]any{}
	for _, s := range settings {
		if s.appliesTo(role) {
			defaults[s.name] = s.def(role)
			sources[s.name] = Source{Layer: "default"}
		}
	}
	if err := k.Load(confmap.Provider(defaults, delim), nil); err != nil {
		return nil, fmt.Errorf("load defaults: %w", err)
	}

	// Config file.
	if opts.ConfigFile != "" {
		fk := koanf.New(delim)
		if err := fk.Load(file.Provider(opts.ConfigFile), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("%w: config file %s: %v", ErrInvalid, opts.ConfigFile, err)
		}
		for _, key := range slices.Sorted(maps.Keys(fk.Raw())) {
			s := lookup(key)
			switch {
			case s == nil || s.name != key:
				return nil, fmt.Errorf("%w: config file %s: unknown key %q", ErrInvalid, opts.ConfigFile, key)
			case s.secret:
				return nil, fmt.Errorf("%w: config file %s: %s is a secret and cannot be set in a config file; set %s or %s-file", ErrInvalid, opts.ConfigFile, key, envName(key), key)
			case !s.appliesTo(role):
				// A file shared by both roles may hold the other role's settings.
				fk.Delete(key)
				continue
			}
			sources[key] = Source{Layer: "file", Detail: opts.ConfigFile}
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("merge config file: %w", err)
		}
	}

	// Environment.
	ek := koanf.New(delim)
	err := ek.Load(env.Provider(delim, env.Opt{
		Prefix:      "TALON_",
		EnvironFunc: func() []string { return opts.Environ },
		TransformFunc: func(name, value string) (string, any) {
			for _, s := range settings {
				if envName(s.name) == name && s.appliesTo(role) {
					sources[s.name] = Source{Layer: "env", Detail: name}
					return s.name, value
				}
			}
			return "", nil // not a setting of this role (TALON_ETCD_BIN and the like)
		},
	}), nil)
	if err != nil {
		return nil, fmt.Errorf("load environment: %w", err)
	}
	if err := k.Merge(ek); err != nil {
		return nil, fmt.Errorf("merge environment: %w", err)
	}

	// Flags the user set.
	if opts.Flags != nil {
		set := map[string]any{}
		opts.Flags.Visit(func(f *pflag.Flag) {
			s := lookup(f.Name)
			if s == nil || !s.appliesTo(role) {
				return
			}
			if rv, ok := f.Value.(*rawValue); ok {
				set[s.name] = rv.raw()
				sources[s.name] = Source{Layer: "flag", Detail: "--" + f.Name}
			}
		})
		if err := k.Load(confmap.Provider(set, delim), nil); err != nil {
			return nil, fmt.Errorf("load flags: %w", err)
		}
	}

	c := &Config{Role: role}
	values := map[string]any{}
	for _, s := range settings {
		if !s.appliesTo(role) {
			continue
		}
		raw := k.Get(s.name)
		if s.kind == kindMap {
			raw = mapValue(k, s.name)
		}
		v, err := parse(s, raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s (from %s): %v", ErrInvalid, s.name, describe(raw, s.secret), sources[s.name], err)
		}
		s.set(c, v)
		values[s.name] = v
	}
	if err := readSecretFiles(c, sources); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Loaded{Config: c, Sources: sources, values: values}, nil
}

// mapValue returns a map setting from koanf, which stores YAML mappings
// nested but flag and environment values as strings.
func mapValue(k *koanf.Koanf, name string) any {
	if m, ok := k.Get(name).(map[string]any); ok {
		return m
	}
	return k.Get(name)
}

// describe renders a raw value for an error message, never a secret.
func describe(raw any, secret bool) string {
	if secret {
		return redacted
	}
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case []string:
		return strconv.Quote(strings.Join(v, ","))
	}
	return fmt.Sprintf("%v", raw)
}

// parse converts a raw value (a string from flags and the environment, a
// YAML scalar, sequence or mapping from a file) into the setting's type.
func parse(s setting, raw any) (any, error) {
	switch s.kind {
	case kindString:
		switch v := raw.(type) {
		case string:
			return strings.TrimSpace(v), nil
		case int, int64, float64, bool:
			return fmt.Sprint(v), nil
		}
	case kindDuration:
		str, ok := raw.(string)
		if !ok {
			return nil, errors.New("must be a duration with a unit, such as 500ms, 5s or 1m")
		}
		d, err := time.ParseDuration(strings.TrimSpace(str))
		if err != nil {
			return nil, errors.New("must be a duration with a unit, such as 500ms, 5s or 1m")
		}
		if d < 0 {
			return nil, errors.New("must not be negative")
		}
		return d, nil
	case kindInt:
		switch v := raw.(type) {
		case int:
			return v, nil
		case int64:
			return int(v), nil
		case float64:
			if v == float64(int(v)) {
				return int(v), nil
			}
		case string:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err == nil {
				return n, nil
			}
		}
		return nil, errors.New("must be a whole number")
	case kindBool:
		switch v := raw.(type) {
		case bool:
			return v, nil
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err == nil {
				return b, nil
			}
		}
		return nil, errors.New("must be true or false")
	case kindBytes:
		switch v := raw.(type) {
		case int:
			return int64(v), nil
		case int64:
			return v, nil
		case string:
			n, err := humanize.ParseBytes(strings.TrimSpace(v))
			if err == nil && n <= 1<<62 {
				return int64(n), nil
			}
		}
		return nil, errors.New("must be a size such as 4MiB, 10GiB or a byte count")
	case kindList:
		var out []string
		switch v := raw.(type) {
		case string:
			out = splitList(v)
		case []string:
			for _, e := range v {
				out = append(out, splitList(e)...)
			}
		case []any:
			for _, e := range v {
				str, ok := e.(string)
				if !ok {
					return nil, errors.New("must be a list of strings")
				}
				out = append(out, splitList(str)...)
			}
		default:
			return nil, errors.New("must be a list of strings")
		}
		return out, nil
	case kindMap:
		out := map[string]string{}
		switch v := raw.(type) {
		case map[string]any:
			for key, val := range v {
				str, ok := val.(string)
				if !ok {
					str = fmt.Sprint(val)
				}
				out[key] = str
			}
		case string, []string, []any:
			items, err := parse(setting{kind: kindList}, v)
			if err != nil {
				return nil, err
			}
			for _, item := range items.([]string) {
				key, val, ok := strings.Cut(item, "=")
				if !ok {
					return nil, fmt.Errorf("entry %q must be key=value", item)
				}
				out[key] = val
			}
		case nil:
		default:
			return nil, errors.New("must be a mapping of key: value")
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a %s", s.kind)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readSecretFiles fills secrets from the files named by settings. A value
// from the environment and a file together is ambiguous and rejected.
func readSecretFiles(c *Config, sources map[string]Source) error {
	if c.Etcd.PasswordFile != "" {
		if c.Etcd.Password.IsSet() {
			return fmt.Errorf("%w: etcd-password-file %q and %s are both set; set only one", ErrInvalid, c.Etcd.PasswordFile, envName("etcd-password"))
		}
		b, err := os.ReadFile(c.Etcd.PasswordFile)
		if err != nil {
			return fmt.Errorf("%w: etcd-password-file %q (from %s): %v", ErrInvalid, c.Etcd.PasswordFile, sources["etcd-password-file"], errors.Unwrap(err))
		}
		c.Etcd.Password = Secret(strings.TrimRight(string(b), "\r\n"))
	}
	if c.Admin.TokenFile != "" {
		b, err := os.ReadFile(c.Admin.TokenFile)
		if err != nil {
			return fmt.Errorf("%w: admin-token-file %q (from %s): %v", ErrInvalid, c.Admin.TokenFile, sources["admin-token-file"], errors.Unwrap(err))
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				c.Admin.Tokens = append(c.Admin.Tokens, Secret(line))
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("%w: admin-token-file %q holds no token; authentication would accept nobody", ErrInvalid, c.Admin.TokenFile)
		}
	}
	return nil
}
