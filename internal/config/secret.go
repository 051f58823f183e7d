package config

import "log/slog"

// Secret holds a credential. Every way of printing it is redacted; call
// Reveal to use it.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

// String redacts the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts the secret in %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts the secret in JSON, YAML and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
