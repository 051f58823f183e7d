package state

import (
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/talonhq/talon/internal/cluster"
)

// RenewalLog is implemented by backends whose accepted heartbeats may
// renew a record's lease without writing the record (etcd): no other
// coordinator sees such a renewal in the records, so each coordinator
// publishes the renewals it accepted, in small compressed batches, and
// watches its peers'. Nothing decides on them: they only make every
// coordinator's heartbeat ages exact (ADR 0001 amendment, "heartbeat
// ages on every coordinator"). A backend whose renewals show in what
// every coordinator reads (Kubernetes: a Lease's renewTime) does not
// implement it.
//
// Backends implement it beside Store (the coordinator finds it with a
// type assertion on its Store). A publisher's batch is kept for about a
// lease TTL after its last publication and then dropped with it, so the
// log holds at most one batch per live coordinator.
type RenewalLog interface {
	// PublishRenewals replaces coordinator from's batch with batch (the
	// renewals it accepted since its previous one). keepFor is how long
	// the batch outlives a publisher that stops publishing.
	PublishRenewals(ctx context.Context, clusterID, from string, batch []Renewal, keepFor time.Duration) error
	// WatchRenewals sends the batches other coordinators publish from
	// about now on (not from's own), each decoded. The channel is closed
	// when ctx ends or the watch fails: the reader watches again.
	WatchRenewals(ctx context.Context, clusterID, from string) <-chan []Renewal
}

// Renewal is one accepted heartbeat that only renewed its record's lease.
type Renewal struct {
	Role   cluster.Role
	NodeID string
	// Incarnation is IncarnationTag of the record's incarnation ID: a
	// renewal of an incarnation that has since been replaced is ignored
	// (a tag collision only shows an age, decides nothing).
	Incarnation uint32
	// AtUnixMs is when the publisher accepted the heartbeat (its wall
	// clock).
	AtUnixMs int64
}

// IncarnationTag is the 32-bit tag of an incarnation ID a Renewal
// carries: four bytes instead of the ID's up to 64.
func IncarnationTag(incarnationID string) uint32 {
	return uint32(xxh3.HashString(incarnationID))
}

// Limits of an encoded renewal batch.
const (
	// MaxRenewalBatch bounds the renewals in one batch: a heartbeat
	// interval's renewals of cluster.MaxRecords workers.
	MaxRenewalBatch = 100_000
	// MaxRenewalBatchBytes bounds an encoded batch, under etcd's default
	// 1.5 MiB request limit.
	MaxRenewalBatchBytes = 1 << 20
	renewalFormat        = 1
	// maxRenewalRaw bounds a batch decompressed (DEFLATE may expand a
	// thousandfold).
	maxRenewalRaw = 8 << 20
)

// Errors of DecodeRenewals.
var ErrRenewalBatch = errors.New("renewal batch")

// EncodeRenewals encodes batch: a format byte, then DEFLATE of the
// renewals sorted by node, each as role, node ID (length-prefixed),
// incarnation tag and the time as a varint delta from the previous
// renewal's (zig-zag; the first from 0). About 6 bytes a renewal for
// node IDs that share a pattern (worker-0001, ...). batch is not
// modified.
func EncodeRenewals(batch []Renewal) ([]byte, error) {
	if len(batch) > MaxRenewalBatch {
		return nil, fmt.Errorf("%w: %d renewals: at most %d", ErrRenewalBatch, len(batch), MaxRenewalBatch)
	}
	sorted := slices.Clone(batch)
	slices.SortFunc(sorted, func(a, b Renewal) int {
		return cmp.Or(strings.Compare(string(a.Role), string(b.Role)), strings.Compare(a.NodeID, b.NodeID))
	})
	raw := make([]byte, 0, 16*len(sorted)+8)
	raw = binary.AppendUvarint(raw, uint64(len(sorted)))
	var prev int64
	for _, r := range sorted {
		if err := cluster.ValidateID("nodeId", r.NodeID); err != nil || !r.Role.Valid() {
			return nil, fmt.Errorf("%w: renewal of %s %q: not a valid role and node ID", ErrRenewalBatch, r.Role, r.NodeID)
		}
		raw = binary.AppendUvarint(raw, uint64(len(r.Role)))
		raw = append(raw, r.Role...)
		raw = binary.AppendUvarint(raw, uint64(len(r.NodeID)))
		raw = append(raw, r.NodeID...)
		raw = binary.BigEndian.AppendUint32(raw, r.Incarnation)
		raw = binary.AppendVarint(raw, r.AtUnixMs-prev)
		prev = r.AtUnixMs
	}
	var out bytes.Buffer
	out.WriteByte(renewalFormat)
	zw, err := flate.NewWriter(&out, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if out.Len() > MaxRenewalBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded: at most %d", ErrRenewalBatch, out.Len(), MaxRenewalBatchBytes)
	}
	return out.Bytes(), nil
}

// DecodeRenewals decodes what EncodeRenewals wrote. It reads untrusted
// bytes (the store's): it never allocates more than the limits allow and
// answers ErrRenewalBatch for anything malformed.
func DecodeRenewals(b []byte) ([]Renewal, error) {
	if len(b) == 0 || b[0] != renewalFormat {
		return nil, fmt.Errorf("%w: unknown format", ErrRenewalBatch)
	}
	if len(b) > MaxRenewalBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes: at most %d", ErrRenewalBatch, len(b), MaxRenewalBatchBytes)
	}
	zr := flate.NewReader(bytes.NewReader(b[1:]))
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, maxRenewalRaw+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRenewalBatch, err)
	}
	if len(raw) > maxRenewalRaw {
		return nil, fmt.Errorf("%w: more than %d bytes decompressed", ErrRenewalBatch, maxRenewalRaw)
	}
	d := renewalDecoder{b: raw}
	n := d.uvarint()
	if d.err != nil || n > MaxRenewalBatch {
		return nil, fmt.Errorf("%w: bad count", ErrRenewalBatch)
	}
	out := make([]Renewal, 0, min(n, uint64(len(raw)/8)))
	var prev int64
	for range n {
		role, node := cluster.Role(d.str(16)), d.str(cluster.MaxIDBytes)
		tag := d.u32()
		prev += d.varint()
		if d.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRenewalBatch, d.err)
		}
		if !role.Valid() || cluster.ValidateID("nodeId", node) != nil {
			return nil, fmt.Errorf("%w: renewal of %q %q: not a valid role and node ID", ErrRenewalBatch, role, node)
		}
		out = append(out, Renewal{Role: role, NodeID: node, Incarnation: tag, AtUnixMs: prev})
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrRenewalBatch, len(d.b))
	}
	return out, nil
}

type renewalDecoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *renewalDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *renewalDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *renewalDecoder) str(limit int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.err = fmt.Errorf("string of %d bytes: at most %d", n, min(limit, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *renewalDecoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}
