package config

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/talonhq/talon/internal/suggest"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

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
	loader  *loader           // for the sources of Problems
}

// Load builds the configuration of role from defaults, the config file,
// the environment and the flags, in increasing precedence, then validates
// it. Secrets are read from the environment and from the files named by
// settings.
func Load(role cluster.Role, opts Options) (*Loaded, error) {
	loaded, err := LoadUnvalidated(role, opts)
	if err != nil {
		return nil, err
	}
	if err := loaded.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w%s", ErrInvalid, err, loaded.loader.sourcesOf(err.Error()))
	}
	return loaded, nil
}

// LoadUnvalidated is Load without the validation: for talon config print,
// which shows an invalid configuration with its Problems marked. Errors
// are those of reading and parsing (a value that is not a duration, a
// missing file).
func LoadUnvalidated(role cluster.Role, opts Options) (*Loaded, error) {
	l := &loader{role: role, k: koanf.New(delim), sources: map[string]Source{}}
	if err := l.applyDefaults(); err != nil {
		return nil, err
	}
	if err := l.applyFile(opts.ConfigFile); err != nil {
		return nil, err
	}
	if err := l.applyEnv(opts.Environ); err != nil {
		return nil, err
	}
	if err := l.applyFlags(opts.Flags); err != nil {
		return nil, err
	}
	c, values, err := l.build()
	if err != nil {
		return nil, err
	}
	if err := readSecretFiles(c, l.sources); err != nil {
		return nil, err
	}
	loaded := &Loaded{Config: c, Sources: l.sources, values: values, loader: l}
	c.Effective = loaded.Print
	return loaded, nil
}

// Problems returns every problem Validate would report, one per group of
// checks (identity, addresses, timeouts, logging and TLS, the role's own,
// the control plane's TLS), each naming where the settings it mentions
// came from.
func (l *Loaded) Problems() []error {
	var out []error
	for _, err := range l.Config.problems() {
		out = append(out, fmt.Errorf("%w%s", err, l.loader.sourcesOf(err.Error())))
	}
	return out
}

// sourcesOf names where the settings a validation message mentions came
// from: " (lease-ttl from env TALON_LEASE_TTL; unhealthy-after from
// default)", or "" when it names none.
func (l *loader) sourcesOf(msg string) string {
	var parts []string
	for _, s := range settings {
		src, ok := l.sources[s.name]
		if !ok || !mentions(msg, s.name) {
			continue
		}
		parts = append(parts, s.name+" from "+src.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// mentions reports whether msg names setting as a whole word.
func mentions(msg, setting string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], setting)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(setting)
		before := j == 0 || !isNameByte(msg[j-1])
		after := end == len(msg) || !isNameByte(msg[end])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isNameByte(b byte) bool {
	return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
}

// loader merges the layers of one Load into k, recording in sources the
// layer each setting's value came from. Each apply step overrides the
// ones before it.
type loader struct {
	role    cluster.Role
	k       *koanf.Koanf
	sources map[string]Source
}

func (l *loader) applyDefaults() error {
	defaults := map[string]any{}
	for _, s := range settings {
		if s.appliesTo(l.role) {
			defaults[s.name] = s.def(l.role)
			l.sources[s.name] = Source{Layer: "default"}
		}
	}
	if err := l.k.Load(confmap.Provider(defaults, delim), nil); err != nil {
		return fmt.Errorf("load defaults: %w", err)
	}
	return nil
}

// applyFile merges the config file at path, if any. Unknown keys and
// secrets are rejected; settings of the other role are ignored, as a file
// may be shared by both roles.
func (l *loader) applyFile(path string) error {
	if path == "" {
		return nil
	}
	if err := checkConfigFile(path); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fk := koanf.New(delim)
	if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
		return fmt.Errorf("%w: config file %s: %v", ErrInvalid, path, err)
	}
	for _, key := range slices.Sorted(maps.Keys(fk.Raw())) {
		s := lookup(key)
		switch {
		case s == nil || s.name != key:
			return fmt.Errorf("%w: config file %s: unknown key %q%s", ErrInvalid, path, key, suggest.Hint(key, settingNames()))
		case s.secret:
			return fmt.Errorf("%w: config file %s: %s is a secret and cannot be set in a config file; set %s or %s-file", ErrInvalid, path, key, envName(key), key)
		case !s.appliesTo(l.role):
			fk.Delete(key)
			continue
		}
		l.sources[key] = Source{Layer: "file", Detail: path}
	}
	if err := l.k.Merge(fk); err != nil {
		return fmt.Errorf("merge config file: %w", err)
	}
	return nil
}

// applyEnv merges the TALON_ variables of environ that name a setting of
// the role; others (TALON_ETCD_BIN and the like) are ignored.
func (l *loader) applyEnv(environ []string) error {
	ek := koanf.New(delim)
	err := ek.Load(env.Provider(delim, env.Opt{
		Prefix:        "TALON_",
		EnvironFunc:   func() []string { return environ },
		TransformFunc: l.envSetting,
	}), nil)
	if err != nil {
		return fmt.Errorf("load environment: %w", err)
	}
	if err := l.k.Merge(ek); err != nil {
		return fmt.Errorf("merge environment: %w", err)
	}
	return nil
}

// envSetting maps the variable name to its setting's name, or to "" when
// it names no setting of the role.
func (l *loader) envSetting(name, value string) (string, any) {
	for _, s := range settings {
		if envName(s.name) == name && s.appliesTo(l.role) {
			l.sources[s.name] = Source{Layer: "env", Detail: name}
			return s.name, value
		}
	}
	return "", nil
}

// applyFlags merges the flags of fs the user set; fs may be nil.
func (l *loader) applyFlags(fs *pflag.FlagSet) error {
	if fs == nil {
		return nil
	}
	set := map[string]any{}
	fs.Visit(func(f *pflag.Flag) {
		s := lookup(f.Name)
		if s == nil || !s.appliesTo(l.role) {
			return
		}
		if rv, ok := f.Value.(*rawValue); ok {
			set[s.name] = rv.raw()
			l.sources[s.name] = Source{Layer: "flag", Detail: "--" + f.Name}
		}
	})
	if err := l.k.Load(confmap.Provider(set, delim), nil); err != nil {
		return fmt.Errorf("load flags: %w", err)
	}
	return nil
}

// build parses the merged value of every setting of the role into a
// Config, and returns the parsed values by setting name too.
func (l *loader) build() (*Config, map[string]any, error) {
	c := &Config{Role: l.role}
	values := map[string]any{}
	for _, s := range settings {
		if !s.appliesTo(l.role) {
			continue
		}
		raw := l.k.Get(s.name)
		v, err := parse(s, raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s %s (from %s): %v", ErrInvalid, s.name, describe(raw, s.secret), l.sources[s.name], err)
		}
		s.set(c, v)
		values[s.name] = v
	}
	return c, values, nil
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
	if c.Admin.EnvToken.IsSet() {
		t, err := ParseAdminToken(c.Admin.EnvToken.Reveal(), "env")
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, envName("admin-token"), err)
		}
		c.Admin.Tokens = append(c.Admin.Tokens, t)
	}
	if c.Admin.TokenFile != "" {
		toks, err := ReadAdminTokenFile(c.Admin.TokenFile)
		if err != nil {
			return fmt.Errorf("%w: %w (from %s)", ErrInvalid, err, sources["admin-token-file"])
		}
		c.Admin.FileTokens = toks
	}
	return nil
}

// ReadAdminTokenFile reads and parses an admin token file (see
// ParseAdminTokens); errors name the setting and the file. It is the
// start-up read, which takes a file whose last line has no newline as it
// is; a reload uses ReloadAdminTokenFile.
func ReadAdminTokenFile(path string) ([]AdminToken, error) {
	toks, _, err := ReloadAdminTokenFile(path)
	return toks, err
}

// ReloadAdminTokenFile is ReadAdminTokenFile that also reports whether
// the file's last line lacks its newline (unterminated): every line of a
// complete file ends with "\n", so such a file may be a write still in
// progress, its last token a prefix of the one being written. The reader
// decides what to do with it (the admin listener waits for the file to
// settle, see admin's doc).
func ReloadAdminTokenFile(path string) (toks []AdminToken, unterminated bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("admin-token-file %q: %v", path, errors.Unwrap(err))
	}
	toks, err = ParseAdminTokens(string(b), fmt.Sprintf("admin-token-file %q", path))
	return toks, err == nil && lastLineUnterminated(b), err
}

// lastLineUnterminated reports whether b's last line holds anything but
// space and lacks its newline.
func lastLineUnterminated(b []byte) bool {
	last := b[bytes.LastIndexByte(b, '\n')+1:]
	return len(bytes.TrimSpace(last)) > 0
}

// settingNames lists every setting's file key.
func settingNames() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.name
	}
	return out
}

// MaxConfigFileBytes bounds a config file: the largest useful one is a few
// kilobytes.
const MaxConfigFileBytes = 1 << 20

// checkConfigFile refuses, before reading, a config file that is not a
// regular file (a FIFO or /dev/zero would block or never end) or is larger
// than MaxConfigFileBytes.
func checkConfigFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("config file %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("config file %s: must be a regular file, not a %s", path, fileKind(fi.Mode()))
	case fi.Size() > MaxConfigFileBytes:
		return fmt.Errorf("config file %s: %d bytes: must be at most %d", path, fi.Size(), MaxConfigFileBytes)
	}
	return nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}
