package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits from ADR 0001 section 2.
const (
	MaxIDBytes         = 256       // node_id, incarnation_id, cluster_id
	MaxVersionBytes    = 256       // build version
	MaxReasonBytes     = 256       // notReadyReason
	MaxAddressBytes    = 256       // control/data and admin addresses
	MaxLabels          = 16        // deployment labels per record
	MaxLabelKeyBytes   = 63        // label key
	MaxLabelValueBytes = 256       // label value
	MaxRecordBytes     = 16 * 1024 // serialized record
)

// ErrInvalid is wrapped by every validation error, so callers can classify
// them with errors.Is without parsing text.
var ErrInvalid = errors.New("invalid record")

// FieldError describes one field that broke a rule.
type FieldError struct {
	Field string // encoded field name, e.g. "nodeId" or "labels[zone]"
	Value string // the value, or a description of it such as "300 bytes"
	Rule  string // the rule broken, naming the limit
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Rule)
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, value, rule string) error {
	return &FieldError{Field: field, Value: value, Rule: rule}
}

// quote shortens a value for an error message while keeping its size visible.
func quote(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", s[:40], len(s))
	}
	return strconv.Quote(s)
}

// ValidateID checks an identifier: cluster and node IDs. It must be
// 1..MaxIDBytes bytes of [A-Za-z0-9._-], starting with a letter or digit, so
// that it is safe in store keys and object names.
func ValidateID(field, s string) error {
	if s == "" {
		return fieldErr(field, `""`, "must not be empty")
	}
	if len(s) > MaxIDBytes {
		return fieldErr(field, fmt.Sprintf("of %d bytes", len(s)), fmt.Sprintf("must be at most %d bytes", MaxIDBytes))
	}
	if idOK(s, &idByte) {
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fieldErr(field, quote(s), "must start with a letter or digit")
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return fieldErr(field, quote(s), fmt.Sprintf("has %q at byte %d; only letters, digits, '.', '_' and '-' are allowed", c, i))
		}
	}
	return nil
}

// Byte classes of identifiers and label keys, for the checks that pass
// (the common case) without a branch per rule; a value that fails is
// looked at again byte by byte to name what is wrong.
var (
	idByte       = byteClass("._-")
	labelKeyByte = byteClass("._-/")
)

// byteClass returns the table of letters, digits and the bytes of extra.
func byteClass(extra string) (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c))
	}
	for i := 0; i < len(extra); i++ {
		t[extra[i]] = true
	}
	return t
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// idOK reports whether the non-empty s starts with a letter or digit and
// holds only bytes of class.
func idOK(s string, class *[256]bool) bool {
	if !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !class[s[i]] {
			return false
		}
	}
	return true
}

// validateText checks a bounded printable field (incarnation, version).
func validateText(field, s string, max int, required bool) error {
	if textOK(s, max, required) {
		return nil
	}
	return textError(field, s, max, required)
}

// textOK reports whether s passes validateText's rules. It allocates
// nothing, so callers build the field name of an error only for a value
// that fails.
func textOK(s string, max int, required bool) bool {
	if s == "" {
		return !required
	}
	if len(s) > max {
		return false
	}
	if i := plainPrefix(s); i < len(s) {
		// Not printable ASCII, the common case: check the runes from here.
		return textRunesOK(s[i:])
	}
	return true
}

// textRunesOK reports whether s is valid UTF-8 without control or
// bidirectional control characters.
func textRunesOK(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			continue
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Bidi_Control, r) {
			return false
		}
	}
	return true
}

// textError returns the error validateText reports for s, which broke a rule.
func textError(field, s string, max int, required bool) error {
	if s == "" {
		if required {
			return fieldErr(field, `""`, "must not be empty")
		}
		return nil
	}
	if len(s) > max {
		return fieldErr(field, fmt.Sprintf("of %d bytes", len(s)), fmt.Sprintf("must be at most %d bytes", max))
	}
	if !utf8.ValidString(s) {
		return fieldErr(field, quote(s), "must be valid UTF-8")
	}
	for i, r := range s {
		if r >= 0x20 && r < 0x7f {
			continue // printable ASCII, the common case: no table lookups
		}
		switch {
		case unicode.Is(unicode.Cc, r): // C0, DEL and C1
			return fieldErr(field, quote(s), fmt.Sprintf("must not contain control characters (U+%04X at byte %d)", r, i))
		case unicode.Is(unicode.Bidi_Control, r):
			// Bidirectional overrides can make a terminal or UI show text
			// other than what is stored.
			return fieldErr(field, quote(s), fmt.Sprintf("must not contain bidirectional control characters (U+%04X at byte %d)", r, i))
		}
	}
	return nil
}

// ValidateAddress checks a host:port address of at most MaxAddressBytes.
func ValidateAddress(field, s string, required bool) error {
	if s == "" {
		if required {
			return fieldErr(field, `""`, "must not be empty")
		}
		return nil
	}
	if len(s) > MaxAddressBytes {
		return fieldErr(field, fmt.Sprintf("of %d bytes", len(s)), fmt.Sprintf("must be at most %d bytes", MaxAddressBytes))
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fieldErr(field, quote(s), "must be host:port")
	}
	if host == "" {
		return fieldErr(field, quote(s), "must name a host (an advertised address cannot be a wildcard)")
	}
	if !ValidHost(host) {
		return fieldErr(field, quote(s), "host must be an IP address or a DNS name (letters, digits, '-' and '_' in dot-separated labels of at most 63)")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fieldErr(field, quote(s), "port must be a number from 1 to 65535")
	}
	return validateText(field, s, MaxAddressBytes, required)
}

// dnsName is a host name: dot-separated labels of letters, digits, '-'
// and '_' (seen in internal names), each 1..63 and not starting or ending
// with '-', optionally with a final dot.
var dnsName = regexp.MustCompile(`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$`)

// ValidHost reports whether host is an IP address (IPv6 with an optional
// zone) or a DNS name of at most 253 bytes.
func ValidHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return len(host) <= 253 && dnsName.MatchString(host)
}

// ValidateLabelKey checks a deployment label key: 1..63 bytes, letters,
// digits, '.', '_', '-' and '/', starting and ending with a letter or digit
// (the Kubernetes qualified-name shape, so labels carry over to pods).
func ValidateLabelKey(k string) error {
	field := "labels key"
	if k == "" {
		return fieldErr(field, `""`, "must not be empty")
	}
	if len(k) > MaxLabelKeyBytes {
		return fieldErr(field, fmt.Sprintf("%s of %d bytes", quote(k), len(k)), fmt.Sprintf("must be at most %d bytes", MaxLabelKeyBytes))
	}
	if idOK(k, &labelKeyByte) && isAlnum(k[len(k)-1]) {
		return nil
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if (i == 0 || i == len(k)-1) && !alnum {
			return fieldErr(field, quote(k), "must start and end with a letter or digit")
		}
		if !alnum && c != '.' && c != '_' && c != '-' && c != '/' {
			return fieldErr(field, quote(k), fmt.Sprintf("has %q at byte %d; only letters, digits, '.', '_', '-' and '/' are allowed", c, i))
		}
	}
	return nil
}

// ValidateLabels checks a label set against the count, key and value limits.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fieldErr("labels", fmt.Sprintf("with %d entries", len(labels)), fmt.Sprintf("must have at most %d labels", MaxLabels))
	}
	for k, v := range labels {
		if err := ValidateLabelKey(k); err != nil {
			return err
		}
		if !textOK(v, MaxLabelValueBytes, false) {
			return textError("labels["+k+"]", v, MaxLabelValueBytes, false)
		}
	}
	return nil
}

// Validate checks every field of r against the ADR limits, including the
// size of its encoded form. The first broken rule is returned.
func (r *Record) Validate() error {
	_, err := Encode(r)
	return err
}

// checkSize applies the encoded size rule to an encoding of n bytes.
func checkSize(n int) error {
	if n > MaxRecordBytes {
		return fieldErr("record", fmt.Sprintf("of %d bytes encoded", n), fmt.Sprintf("must be at most %d bytes", MaxRecordBytes))
	}
	return nil
}

// ValidateFields checks every field rule but the encoded size, which
// Encode checks on the bytes it produces. It does not marshal.
func (r *Record) ValidateFields() error {
	if err := r.validateScalars(); err != nil {
		return err
	}
	return ValidateLabels(r.Labels)
}

// validLabel reports whether one label passes ValidateLabels' rules.
func validLabel(k, v string) bool {
	return ValidateLabelKey(k) == nil && textOK(v, MaxLabelValueBytes, false)
}

// validateScalars checks every field rule of ValidateFields but the
// labels, which the codec checks on its own pass over them (Decode while
// it reads them, Encode while it collects them to sort).
func (r *Record) validateScalars() error {
	if err := ValidateID("clusterId", r.ClusterID); err != nil {
		return err
	}
	if err := ValidateID("nodeId", r.NodeID); err != nil {
		return err
	}
	if !r.Role.Valid() {
		return fieldErr("role", quote(string(r.Role)), "must be coordinator or worker")
	}
	if err := validateText("incarnationId", r.IncarnationID, MaxIDBytes, true); err != nil {
		return err
	}
	if err := ValidateAddress("address", r.Address, true); err != nil {
		return err
	}
	if err := ValidateAddress("adminAddress", r.AdminAddress, false); err != nil {
		return err
	}
	if err := validateText("version", r.Version, MaxVersionBytes, false); err != nil {
		return err
	}
	if err := validateText("notReadyReason", r.NotReadyReason, MaxReasonBytes, false); err != nil {
		return err
	}
	if r.StartTimeUnixMs < 0 {
		return fieldErr("startTimeUnixMs", strconv.FormatInt(r.StartTimeUnixMs, 10), "must not be negative")
	}
	if r.UpdatedAtUnixMs < 0 {
		return fieldErr("updatedAtUnixMs", strconv.FormatInt(r.UpdatedAtUnixMs, 10), "must not be negative")
	}
	if !r.Health.Valid() {
		return fieldErr("health", quote(string(r.Health)), "must be healthy, degraded, unhealthy or unknown")
	}
	if len(r.Superseded) > MaxSuperseded {
		return fieldErr("superseded", fmt.Sprintf("with %d entries", len(r.Superseded)), fmt.Sprintf("must have at most %d entries", MaxSuperseded))
	}
	for i, id := range r.Superseded {
		if !textOK(id, MaxIDBytes, true) {
			return textError(fmt.Sprintf("superseded[%d]", i), id, MaxIDBytes, true)
		}
	}
	return r.validateMarks()
}

// validateMarks checks the operator and coordinator marks.
func (r *Record) validateMarks() error {
	for _, f := range []struct{ name, v string }{
		{"cordonedBy", r.CordonedBy}, {"revokedBy", r.RevokedBy}, {"revokedReason", r.RevokedReason}, {"credentialSerial", r.CredentialSerial},
	} {
		if err := validateText(f.name, f.v, MaxIDBytes, false); err != nil {
			return err
		}
	}
	if r.CordonedAtUnixMs < 0 {
		return fieldErr("cordonedAtUnixMs", strconv.FormatInt(r.CordonedAtUnixMs, 10), "must not be negative")
	}
	if r.StatusAtUnixMs < 0 {
		return fieldErr("statusAtUnixMs", strconv.FormatInt(r.StatusAtUnixMs, 10), "must not be negative")
	}
	if r.HeartbeatAtUnixMs < 0 {
		return fieldErr("heartbeatAtUnixMs", strconv.FormatInt(r.HeartbeatAtUnixMs, 10), "must not be negative")
	}
	return validatePlacementView(r)
}

// validatePlacementView checks a coordinator's published placement:
// 16 lower-case hex digits, a count that is not negative, none on a
// worker.
func validatePlacementView(r *Record) error {
	if r.Role != RoleCoordinator && (r.PlacementVersion != "" || r.EligibleWorkers != 0) {
		return fieldErr("placementVersion", r.PlacementVersion, "only a coordinator's record carries one")
	}
	if v := r.PlacementVersion; v != "" && (len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "") {
		return fieldErr("placementVersion", v, "must be 16 lower-case hex digits")
	}
	if r.EligibleWorkers < 0 {
		return fieldErr("eligibleWorkers", strconv.FormatInt(r.EligibleWorkers, 10), "must not be negative")
	}
	if r.FeatureLevel < 0 || r.FeatureLevel > MaxFeatureLevel {
		return fieldErr("featureLevel", strconv.FormatInt(r.FeatureLevel, 10), fmt.Sprintf("must be from 0 to %d", MaxFeatureLevel))
	}
	return nil
}

// ValidateMarkText checks the text of an operator's or a coordinator's
// mark (cordonedBy and the like) as a record's marks are checked.
func ValidateMarkText(name, v string) error { return validateText(name, v, MaxIDBytes, false) }
