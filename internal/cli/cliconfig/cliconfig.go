// Package cliconfig reads and writes talonctl's configuration file,
// $XDG_CONFIG_HOME/talon/talonctl.yaml (default ~/.config/talon/talonctl.yaml):
// named contexts, each with the coordinators' admin URLs, a token file, a
// CA file and TLS and timeout settings, and the current context.
//
// The file holds no secrets: a context names a token file, never a token.
// Relative file names in a context are relative to the directory of the
// configuration file. Unknown keys are errors, so a typo cannot silently
// drop a setting. Save rewrites only current-context, keeping the rest of
// the document (comments included), and replaces the file atomically with
// mode 0600.
package cliconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Dir and FileName place the file under the configuration home.
const (
	Dir      = "talon"
	FileName = "talonctl.yaml"
)

// ErrNoHome is returned by Path when neither XDG_CONFIG_HOME nor HOME is set.
var ErrNoHome = errors.New("neither XDG_CONFIG_HOME nor HOME is set")

// Path returns the configuration file's name: $XDG_CONFIG_HOME/talon/talonctl.yaml
// when XDG_CONFIG_HOME is set (and absolute, as the XDG specification
// requires), else $HOME/.config/talon/talonctl.yaml.
func Path(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, Dir, FileName), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", Dir, FileName), nil
	}
	return "", ErrNoHome
}

// File is the configuration file.
type File struct {
	// CurrentContext names the context used when neither --context nor
	// TALONCTL_CONTEXT names one; empty for none.
	CurrentContext string    `yaml:"current-context,omitempty"`
	Contexts       []Context `yaml:"contexts,omitempty"`

	path   string
	exists bool
	doc    *yaml.Node // the parsed document; nil when the file did not exist or was empty
}

// Context is a named set of connection settings.
type Context struct {
	Name string `yaml:"name"`
	// Servers are admin base URLs of the cluster's coordinators, tried in order.
	Servers []string `yaml:"servers"`
	// TokenFile holds the bearer token (absolute after Load).
	TokenFile string `yaml:"token-file,omitempty"`
	// CAFile holds PEM CA certificates to verify the servers with (absolute after Load).
	CAFile                string `yaml:"ca-file,omitempty"`
	InsecureSkipTLSVerify bool   `yaml:"insecure-skip-tls-verify,omitempty"`
	// Timeout bounds one request to one server, as a Go duration ("5s").
	Timeout string `yaml:"timeout,omitempty"`

	// TimeoutDuration is Timeout parsed; zero when unset.
	TimeoutDuration time.Duration `yaml:"-"`
}

// Load reads and validates the file at path. A missing file is not an
// error: it yields an empty File whose Exists is false.
func Load(path string) (*File, error) {
	f := &File{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	f.exists = true
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a typo must not silently drop a setting
	if err := dec.Decode(f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // empty file
		}
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	// The document as written, so that Save changes only current-context.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	f.doc = &doc
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range f.Contexts {
		c := &f.Contexts[i]
		if c.TokenFile != "" && !filepath.IsAbs(c.TokenFile) {
			c.TokenFile = filepath.Join(dir, c.TokenFile)
		}
		if c.CAFile != "" && !filepath.IsAbs(c.CAFile) {
			c.CAFile = filepath.Join(dir, c.CAFile)
		}
	}
	return f, nil
}

func (f *File) validate() error {
	seen := map[string]bool{}
	for i := range f.Contexts {
		c := &f.Contexts[i]
		switch {
		case strings.TrimSpace(c.Name) == "":
			return fmt.Errorf("contexts[%d].name %q: must not be empty", i, c.Name)
		case seen[c.Name]:
			return fmt.Errorf("contexts[%d].name %q: must be unique (defined twice)", i, c.Name)
		case len(c.Servers) == 0:
			return fmt.Errorf("context %q: servers: must list at least one admin URL", c.Name)
		case c.InsecureSkipTLSVerify && c.CAFile != "":
			return fmt.Errorf("context %q: ca-file and insecure-skip-tls-verify: set at most one", c.Name)
		}
		seen[c.Name] = true
		for j, s := range c.Servers {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("context %q: servers[%d] %q: must not be empty", c.Name, j, s)
			}
		}
		if c.Timeout != "" {
			d, err := time.ParseDuration(c.Timeout)
			if err != nil || d <= 0 {
				return fmt.Errorf("context %q: timeout %q: must be a positive duration such as 5s", c.Name, c.Timeout)
			}
			c.TimeoutDuration = d
		}
	}
	return nil
}

// Path returns the file's name.
func (f *File) Path() string { return f.path }

// Exists reports whether the file existed when it was loaded.
func (f *File) Exists() bool { return f.exists }

// Names returns the context names in file order.
func (f *File) Names() []string {
	names := make([]string, len(f.Contexts))
	for i, c := range f.Contexts {
		names[i] = c.Name
	}
	return names
}

// Context returns the context called name.
func (f *File) Context(name string) (*Context, bool) {
	i := slices.IndexFunc(f.Contexts, func(c Context) bool { return c.Name == name })
	if i < 0 {
		return nil, false
	}
	return &f.Contexts[i], true
}

// UndefinedError is the error of a context name the file does not define.
func (f *File) UndefinedError(name string) error {
	if len(f.Contexts) == 0 {
		if !f.exists {
			return fmt.Errorf("context %q is not defined: there is no config file %s", name, f.path)
		}
		return fmt.Errorf("context %q is not defined: %s defines no contexts", name, f.path)
	}
	return fmt.Errorf("context %q is not defined in %s (defined: %s)", name, f.path, strings.Join(f.Names(), ", "))
}

// SetCurrentContext makes name the current context; it must be defined.
func (f *File) SetCurrentContext(name string) error {
	if _, ok := f.Context(name); !ok {
		return f.UndefinedError(name)
	}
	f.CurrentContext = name
	return nil
}

// Save writes current-context into the file atomically (a temporary file
// in the same directory, synced and renamed over it) with mode 0600,
// creating the directory with mode 0700 when needed. Everything else in
// the document is kept as it was read.
func (f *File) Save() error {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	var err error
	if f.doc == nil || len(f.doc.Content) == 0 {
		err = enc.Encode(f)
	} else {
		setKey(f.doc.Content[0], "current-context", f.CurrentContext)
		err = enc.Encode(f.doc)
	}
	if err == nil {
		err = enc.Close()
	}
	if err != nil {
		return fmt.Errorf("config file %s: encoding: %w", f.path, err)
	}
	if err := WriteFileAtomic(f.path, out.Bytes()); err != nil {
		return fmt.Errorf("config file %s: %w", f.path, err)
	}
	f.exists = true
	return nil
}

// setKey sets key to a string value in a mapping node, appending the key
// when absent.
func setKey(m *yaml.Node, key, value string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1].Kind = yaml.ScalarNode
			m.Content[i+1].Tag = "!!str"
			m.Content[i+1].Value = value
			m.Content[i+1].Content = nil
			return
		}
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

// WriteFileAtomic replaces path with data: readers see the old content or
// the new, never a mix. The file gets mode 0600 and its directory, when
// created, 0700.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// Make the rename durable; not every file system supports syncing a
	// directory, and the file is already complete, so a failure is ignored.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
