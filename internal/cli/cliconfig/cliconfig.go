// Package cliconfig reads and writes talonctl's configuration file,
// $XDG_CONFIG_HOME/talon/talonctl.yaml (default ~/.config/talon/talonctl.yaml):
// named contexts, each with the coordinators' admin URLs, a token file, a
// CA file and TLS and timeout settings, and the current context.
//
// The file holds no secrets: a context names a token file, never a token.
// Relative file names in a context are relative to the directory of the
// configuration file. Unknown keys are errors, so a typo cannot silently
// drop a setting. SetContext, DeleteContext and RenameContext edit the
// parsed document and validate the result; Save writes it back, keeping
// everything not edited (comments included), and replaces the file
// atomically with mode 0600.
//
// The file is edited through go.yaml.in/yaml/v3's yaml.Node, which keeps
// comments and key order (sigs.k8s.io/yaml has no such API). -o yaml
// output (cmdutil) goes through sigs.k8s.io/yaml instead, for the API's
// JSON field names and kubectl's formatting (line folding at 80 columns,
// which yaml/v3 cannot be told to do); k8s.io/apimachinery links both.
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
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{path: path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	f, err := parse(path, b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	f.exists = true
	return f, nil
}

// parse decodes and validates the document b of the file at path.
func parse(path string, b []byte) (*File, error) {
	f := &File{path: path}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a typo must not silently drop a setting
	if err := dec.Decode(f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // empty file
		}
		return nil, err
	}
	// The document as written, so that Save changes only what was edited.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	f.doc = &doc
	if err := f.validate(); err != nil {
		return nil, err
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

// Save writes the file atomically (a temporary file in the same
// directory, synced and renamed over it) with mode 0600, creating the
// directory with mode 0700 when needed. Only what was changed (current-
// context, and the contexts SetContext, DeleteContext and RenameContext
// edited) is rewritten; the rest of the document, comments included, is
// kept as it was read.
func (f *File) Save() error {
	out, err := f.encode()
	if err != nil {
		return fmt.Errorf("config file %s: encoding: %w", f.path, err)
	}
	if err := WriteFileAtomic(f.path, out); err != nil {
		return fmt.Errorf("config file %s: %w", f.path, err)
	}
	f.exists = true
	return nil
}

// encode renders the document with current-context set.
func (f *File) encode() ([]byte, error) {
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
	return out.Bytes(), err
}

// ContextSettings are the settings SetContext changes; nil fields are
// left as they are.
type ContextSettings struct {
	Servers               []string
	TokenFile             *string
	CAFile                *string
	InsecureSkipTLSVerify *bool
	Timeout               *string
}

// SetContext creates the context name, or changes the given settings of
// it, and reports whether it was created. A new context needs servers.
// The result is validated as Load validates a file; on error the file is
// unchanged.
func (f *File) SetContext(name string, s ContextSettings) (created bool, err error) {
	if strings.TrimSpace(name) == "" {
		return false, fmt.Errorf("context name %q: must not be empty", name)
	}
	doc := f.editableDoc()
	item := f.contextNode(doc, name)
	if item == nil {
		if len(s.Servers) == 0 {
			return false, fmt.Errorf("context %q does not exist: --server is required to create it", name)
		}
		item = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setKey(item, "name", name)
		seq := contextsNode(doc.Content[0], true)
		seq.Content = append(seq.Content, item)
		created = true
	}
	if s.Servers != nil {
		list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, srv := range s.Servers {
			list.Content = append(list.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: srv})
		}
		setNode(item, "servers", list)
	}
	setOrDelete(item, "token-file", s.TokenFile)
	setOrDelete(item, "ca-file", s.CAFile)
	setOrDelete(item, "timeout", s.Timeout)
	if s.InsecureSkipTLSVerify != nil {
		if *s.InsecureSkipTLSVerify {
			setNode(item, "insecure-skip-tls-verify", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
		} else {
			deleteKey(item, "insecure-skip-tls-verify")
		}
	}
	return created, f.reparse(doc)
}

// DeleteContext removes the context name; when it was the current
// context, current-context is cleared and wasCurrent is true.
func (f *File) DeleteContext(name string) (wasCurrent bool, err error) {
	if _, ok := f.Context(name); !ok {
		return false, f.UndefinedError(name)
	}
	doc := f.editableDoc()
	seq := contextsNode(doc.Content[0], false)
	seq.Content = slicesDeleteNode(seq.Content, f.contextNode(doc, name))
	if f.CurrentContext == name {
		wasCurrent = true
		setKey(doc.Content[0], "current-context", "")
	}
	return wasCurrent, f.reparse(doc)
}

// RenameContext renames the context old to new, which must not exist;
// current-context follows.
func (f *File) RenameContext(old, new string) error {
	if _, ok := f.Context(old); !ok {
		return f.UndefinedError(old)
	}
	if strings.TrimSpace(new) == "" {
		return fmt.Errorf("new name %q: must not be empty", new)
	}
	if _, ok := f.Context(new); ok {
		return fmt.Errorf("new name %q: a context of that name already exists in %s", new, f.path)
	}
	doc := f.editableDoc()
	setKey(f.contextNode(doc, old), "name", new)
	if f.CurrentContext == old {
		setKey(doc.Content[0], "current-context", new)
	}
	return f.reparse(doc)
}

// editableDoc returns a deep copy of the document (an empty mapping when
// there is none) with current-context set, for an edit that may fail.
func (f *File) editableDoc() *yaml.Node {
	if f.doc == nil || len(f.doc.Content) == 0 {
		doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
		if f.CurrentContext != "" {
			setKey(doc.Content[0], "current-context", f.CurrentContext)
		}
		return doc
	}
	doc := deepCopy(f.doc)
	setKey(doc.Content[0], "current-context", f.CurrentContext)
	return doc
}

// reparse validates doc as a file and, when valid, makes it the file's.
func (f *File) reparse(doc *yaml.Node) error {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	nf, err := parse(f.path, out.Bytes())
	if err != nil {
		return err
	}
	nf.exists = f.exists
	*f = *nf
	return nil
}

// contextNode returns the mapping of context name in doc, or nil.
func (f *File) contextNode(doc *yaml.Node, name string) *yaml.Node {
	seq := contextsNode(doc.Content[0], false)
	if seq == nil {
		return nil
	}
	for _, it := range seq.Content {
		if v := valueOf(it, "name"); v != nil && v.Value == name {
			return it
		}
	}
	return nil
}

// contextsNode returns the contexts sequence of the top mapping m,
// creating it when create is set.
func contextsNode(m *yaml.Node, create bool) *yaml.Node {
	if v := valueOf(m, "contexts"); v != nil {
		if v.Kind != yaml.SequenceNode {
			*v = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		}
		return v
	}
	if !create {
		return nil
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	setNode(m, "contexts", seq)
	return seq
}

// valueOf returns the value node of key in mapping m, or nil.
func valueOf(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setNode sets key to v in mapping m, appending it when absent.
func setNode(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// setOrDelete sets key to *v, deletes it when *v is empty, and leaves it
// when v is nil.
func setOrDelete(m *yaml.Node, key string, v *string) {
	switch {
	case v == nil:
	case *v == "":
		deleteKey(m, key)
	default:
		setKey(m, key, *v)
	}
}

// deleteKey removes key from mapping m.
func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

func slicesDeleteNode(nodes []*yaml.Node, n *yaml.Node) []*yaml.Node {
	return slices.DeleteFunc(nodes, func(x *yaml.Node) bool { return x == n })
}

func deepCopy(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = deepCopy(ch)
	}
	return &c
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
