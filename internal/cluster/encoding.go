package cluster

import (
	"bytes"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// SchemaVersion is the version of the record encoding this build writes.
// A reader rejects any other version with ErrUnsupportedVersion before it
// decodes a single field, so rolling coordinators can skip records from a
// newer (or older, incompatible) build instead of misreading them. Additive
// fields within one schema version are ignored by older readers.
const SchemaVersion = 1

// ErrUnsupportedVersion is returned (wrapped in *VersionError) for a record
// whose schema version this build does not read.
var ErrUnsupportedVersion = errors.New("unsupported record schema version")

// ErrMalformed is wrapped by decode errors for bytes that are not a record.
var ErrMalformed = errors.New("malformed record")

// VersionError reports the schema version found.
type VersionError struct{ Version int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("record schema version %d is not supported (this build reads version %d)", e.Version, SchemaVersion)
}

// Unwrap lets errors.Is(err, ErrUnsupportedVersion) match.
func (e *VersionError) Unwrap() error { return ErrUnsupportedVersion }

// envelope is the encoded form: the schema version first, then the record.
// Decode reads it; Encode writes the same shape by hand (appendRecord).
type envelope struct {
	SchemaVersion int `json:"schemaVersion"`
	*Record
}

// versionProbe decodes only the version, so nothing else is read from a
// record of an unknown version.
type versionProbe struct {
	SchemaVersion *int `json:"schemaVersion"`
}

// decodeOptions make github.com/go-json-experiment/json decode exactly as
// encoding/json v1 did (jsonv1.DefaultOptionsV1: case-insensitive names,
// the last of repeated names wins, invalid UTF-8 becomes U+FFFD, a null
// leaves a scalar as it was), except that errors are reported in v2's form
// and at the first one: every decode error is ErrMalformed either way, so
// only the message text differs.
var decodeOptions = jsonv2.JoinOptions(
	jsonv1.DefaultOptionsV1(),
	jsonv1.ReportErrorsWithLegacySemantics(false),
)

// Encode validates r and returns its versioned encoding (JSON, at most
// MaxRecordBytes). The encoding is human-readable on purpose: operators read
// it with etcdctl and kubectl. It encodes once: the size rule is checked on
// the bytes it returns.
func Encode(r *Record) ([]byte, error) {
	if err := r.validateScalars(); err != nil {
		return nil, err
	}
	// One pass over the labels: collect them to sort, and check them.
	var buf [MaxLabels]label
	kv, ok := collectValidLabels(r.Labels, buf[:0])
	if !ok {
		if err := ValidateLabels(r.Labels); err != nil {
			return nil, err
		}
		// Not reached (the same rules), but encode what was checked.
		kv = collectLabels(r.Labels, buf[:0])
	}
	kv = sortLabels(kv)
	b := appendRecordLabels(make([]byte, 0, encodedSizeHint(r, kv)), r, kv)
	if err := checkSize(len(b)); err != nil {
		return nil, err
	}
	return b, nil
}

// canonicalPrefix is how every encoding Encode writes begins. A record that
// starts with it has this build's schema version, so Decode needs no
// separate version probe for it.
var canonicalPrefix = []byte(fmt.Sprintf(`{"schemaVersion":%d,`, SchemaVersion))

// Decode parses and validates an encoded record. It checks the input size
// (at most MaxRecordBytes) and the schema version before decoding any
// field, then every field rule, and returns either a complete record or nil
// and an error wrapping ErrMalformed, ErrUnsupportedVersion or ErrInvalid.
// (Encode checks the size of the re-encoded form, which JSON escaping can
// make larger than the input.)
func Decode(b []byte) (*Record, error) {
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrMalformed, len(b), MaxRecordBytes)
	}
	// The shape Encode writes (every heartbeat) is read by hand; anything
	// else by the general decoder, which gives the same record for that
	// shape (FuzzDecodeCanonical).
	r, labelsValid := decodeCanonical(b)
	if r == nil {
		var err error
		if r, err = decodeGeneral(b); err != nil {
			return nil, err
		}
	}
	// The input is at most MaxRecordBytes, so only the field rules are
	// checked here; re-encoding for the size check would double the cost
	// of every heartbeat. Encode (every store write) checks the size of
	// what is actually stored. The labels are checked as ValidateFields
	// does (last), unless the scanner found every one it read valid.
	if err := r.validateScalars(); err != nil {
		return nil, err
	}
	if !labelsValid {
		if err := ValidateLabels(r.Labels); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// decodeGeneral decodes b with go-json-experiment in encoding/json v1's
// semantics, without validating the fields.
func decodeGeneral(b []byte) (*Record, error) {
	if !bytes.HasPrefix(b, canonicalPrefix) {
		// Not written by Encode (another build, or by hand): read the
		// version alone first, so no field of another schema is decoded.
		var probe versionProbe
		if err := jsonv2.Unmarshal(b, &probe, decodeOptions); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if probe.SchemaVersion == nil {
			return nil, fmt.Errorf("%w: schemaVersion is missing", ErrMalformed)
		}
		if *probe.SchemaVersion != SchemaVersion {
			return nil, &VersionError{Version: *probe.SchemaVersion}
		}
	}
	r := &Record{}
	env := envelope{Record: r}
	if err := jsonv2.Unmarshal(b, &env, decodeOptions); err != nil {
		return nil, decodeError(b, err)
	}
	if env.SchemaVersion != SchemaVersion {
		// A repeated schemaVersion key: JSON keeps the last one.
		return nil, &VersionError{Version: env.SchemaVersion}
	}
	return r, nil
}

// decodeError classifies a record that Unmarshal refused. Unmarshal reads
// the whole input, so trailing data fails it before the version is
// looked at; a record whose first value decodes but carries another
// version (a repeated schemaVersion key) is still reported as
// ErrUnsupportedVersion, as it always was. This runs on errors only.
func decodeError(b []byte, err error) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b), decodeOptions)
	env := envelope{Record: &Record{}}
	if err := jsonv2.UnmarshalDecode(dec, &env); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.SchemaVersion != SchemaVersion {
		return &VersionError{Version: env.SchemaVersion}
	}
	return fmt.Errorf("%w: trailing data after the record: %v", ErrMalformed, err)
}
