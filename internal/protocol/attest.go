package protocol

import (
	"time"

	"github.com/talonhq/talon/internal/cluster"
)

// Attest carries a platform credential that attests which node the
// sending process is: on Kubernetes a projected service account token
// whose pod name is the worker's node ID. The coordinator verifies it
// (TokenReview) and binds the connection to the attested node until the
// credential expires; it answers Attested or Error. The token is a secret:
// it is never logged or echoed in an Error.
type Attest struct {
	Token []byte // 1..MaxAttestTokenBytes bytes
}

func (*Attest) Type() Type { return TypeAttest }

func (m *Attest) AppendBinary(b []byte) ([]byte, error) {
	switch {
	case len(m.Token) == 0:
		return b, fieldErr(TypeAttest, "token", ErrInvalidValue, "must not be empty")
	case len(m.Token) > MaxAttestTokenBytes:
		return b, fieldErr(TypeAttest, "token", ErrFieldTooLarge, "%d bytes exceeds the %d byte limit", len(m.Token), MaxAttestTokenBytes)
	}
	b = appendU16(b, uint16(len(m.Token)))
	return append(b, m.Token...), nil
}

func (m *Attest) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeAttest, b: p}
	tok := r.raw("token", MaxAttestTokenBytes)
	if r.err == nil && len(tok) == 0 {
		r.err = fieldErr(TypeAttest, "token", ErrInvalidValue, "must not be empty")
	}
	if err := r.finish(); err != nil {
		return err
	}
	m.Token = append([]byte(nil), tok...)
	return nil
}

// Attested answers Attest: the connection's writes are bound to NodeID
// until ExpiresUnixMs, after which the sender attests again (on a new
// connection or this one).
type Attested struct {
	NodeID        string // cluster.ValidateID rules
	ExpiresUnixMs int64  // > 0
}

// Expires returns ExpiresUnixMs as a time.
func (m *Attested) Expires() time.Time { return time.UnixMilli(m.ExpiresUnixMs) }

func (*Attested) Type() Type { return TypeAttested }

func (m *Attested) validate() error {
	if err := cluster.ValidateID("nodeId", m.NodeID); err != nil {
		return &FieldError{Type: TypeAttested, Field: "nodeId", Kind: kindOf(len(m.NodeID), cluster.MaxIDBytes), Detail: clusterDetail(err)}
	}
	if m.ExpiresUnixMs <= 0 {
		return fieldErr(TypeAttested, "expiresUnixMs", ErrInvalidValue, "%d is not positive", m.ExpiresUnixMs)
	}
	return nil
}

func (m *Attested) AppendBinary(b []byte) ([]byte, error) {
	if err := m.validate(); err != nil {
		return b, err
	}
	b = appendStr(b, m.NodeID)
	return appendU64(b, uint64(m.ExpiresUnixMs)), nil
}

func (m *Attested) UnmarshalBinary(p []byte) error {
	r := reader{t: TypeAttested, b: p}
	var a Attested
	a.NodeID = r.str("nodeId", cluster.MaxIDBytes, true)
	a.ExpiresUnixMs = int64(r.u64("expiresUnixMs"))
	if err := r.finish(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}
	*m = a
	return nil
}
