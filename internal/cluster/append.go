package cluster

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// appendRecord appends the stored form of r to dst: byte for byte what
// encoding/json's Marshal writes for envelope{SchemaVersion, r}, the form
// operators see with etcdctl and kubectl. It exists because the heartbeat
// path (decode, validate, encode) has a budget of 10 µs, which a
// reflection-based encoder does not meet. TestAppendRecordMatchesMarshal
// and FuzzAppendString hold it to encoding/json's output; a field added to
// Record must be added here, in the same order and with the same omitempty
// rule as its tag (TestAppendRecordCoversEveryField checks that).
func appendRecord(dst []byte, r *Record) []byte {
	return appendRecordLabels(dst, r, sortLabels(collectLabels(r.Labels, nil)))
}

// appendRecordLabels is appendRecord with r's labels given as kv, sorted
// by key.
func appendRecordLabels(dst []byte, r *Record, kv []label) []byte {
	dst = append(dst, `{"schemaVersion":`...)
	dst = strconv.AppendInt(dst, SchemaVersion, 10)
	dst = append(dst, `,"clusterId":`...)
	dst = appendString(dst, r.ClusterID)
	dst = append(dst, `,"nodeId":`...)
	dst = appendString(dst, r.NodeID)
	dst = append(dst, `,"role":`...)
	dst = appendString(dst, string(r.Role))
	dst = append(dst, `,"incarnationId":`...)
	dst = appendString(dst, r.IncarnationID)
	dst = append(dst, `,"address":`...)
	dst = appendString(dst, r.Address)
	if r.AdminAddress != "" {
		dst = append(dst, `,"adminAddress":`...)
		dst = appendString(dst, r.AdminAddress)
	}
	dst = append(dst, `,"version":`...)
	dst = appendString(dst, r.Version)
	dst = append(dst, `,"startTimeUnixMs":`...)
	dst = strconv.AppendInt(dst, r.StartTimeUnixMs, 10)
	dst = append(dst, `,"heartbeatSeq":`...)
	dst = strconv.AppendUint(dst, r.HeartbeatSeq, 10)
	dst = append(dst, `,"updatedAtUnixMs":`...)
	dst = strconv.AppendInt(dst, r.UpdatedAtUnixMs, 10)
	dst = append(dst, `,"health":`...)
	dst = appendString(dst, string(r.Health))
	dst = append(dst, `,"ready":`...)
	dst = strconv.AppendBool(dst, r.Ready)
	if r.NotReadyReason != "" {
		dst = append(dst, `,"notReadyReason":`...)
		dst = appendString(dst, r.NotReadyReason)
	}

	c := &r.Capacity
	dst = append(dst, `,"capacity":{"capacityBytes":`...)
	dst = strconv.AppendUint(dst, c.CapacityBytes, 10)
	dst = append(dst, `,"residentBytes":`...)
	dst = strconv.AppendUint(dst, c.ResidentBytes, 10)
	dst = append(dst, `,"blocks":`...)
	dst = strconv.AppendUint(dst, c.Blocks, 10)
	dst = append(dst, `,"pages":`...)
	dst = strconv.AppendUint(dst, c.Pages, 10)
	dst = append(dst, `,"inflightLoads":`...)
	dst = strconv.AppendUint(dst, c.InflightLoads, 10)
	if c.StoreHealthy {
		dst = append(dst, `,"storeHealthy":true`...)
	}

	n := &r.Counters
	dst = append(dst, `},"counters":{"requestsTotal":`...)
	dst = strconv.AppendUint(dst, n.RequestsTotal, 10)
	dst = append(dst, `,"errorsTotal":`...)
	dst = strconv.AppendUint(dst, n.ErrorsTotal, 10)
	dst = append(dst, `,"hitsTotal":`...)
	dst = strconv.AppendUint(dst, n.HitsTotal, 10)
	dst = append(dst, `,"missesTotal":`...)
	dst = strconv.AppendUint(dst, n.MissesTotal, 10)
	dst = append(dst, `,"bytesServedTotal":`...)
	dst = strconv.AppendUint(dst, n.BytesServedTotal, 10)
	dst = append(dst, `,"backendFetchesTotal":`...)
	dst = strconv.AppendUint(dst, n.BackendFetchesTotal, 10)
	dst = append(dst, `,"backendErrorsTotal":`...)
	dst = strconv.AppendUint(dst, n.BackendErrorsTotal, 10)
	dst = append(dst, `,"evictionsTotal":`...)
	dst = strconv.AppendUint(dst, n.EvictionsTotal, 10)
	dst = append(dst, `,"placementLookupsTotal":`...)
	dst = strconv.AppendUint(dst, n.PlacementLookupsTotal, 10)
	dst = append(dst, `,"placementErrorsTotal":`...)
	dst = strconv.AppendUint(dst, n.PlacementErrorsTotal, 10)
	dst = append(dst, `,"storeErrorsTotal":`...)
	dst = strconv.AppendUint(dst, n.StoreErrorsTotal, 10)
	dst = append(dst, '}')

	if len(kv) > 0 {
		dst = append(dst, `,"labels":{`...)
		for i, l := range kv {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, l.k)
			dst = append(dst, ':')
			dst = appendString(dst, l.v)
		}
		dst = append(dst, '}')
	}
	if r.Generation != 0 {
		dst = append(dst, `,"generation":`...)
		dst = strconv.AppendUint(dst, r.Generation, 10)
	}
	if len(r.Superseded) > 0 {
		dst = append(dst, `,"superseded":[`...)
		for i, id := range r.Superseded {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, id)
		}
		dst = append(dst, ']')
	}
	if r.Late {
		dst = append(dst, `,"late":true`...)
	}
	return appendMarks(dst, r)
}

// appendMarks appends the fields after late and the closing brace.
func appendMarks(dst []byte, r *Record) []byte {
	if r.Drained {
		dst = append(dst, `,"drained":true`...)
	}
	if r.CordonedBy != "" {
		dst = append(dst, `,"cordonedBy":`...)
		dst = appendString(dst, r.CordonedBy)
	}
	if r.CordonedAtUnixMs != 0 {
		dst = append(dst, `,"cordonedAtUnixMs":`...)
		dst = strconv.AppendInt(dst, r.CordonedAtUnixMs, 10)
	}
	if r.CordonPersist {
		dst = append(dst, `,"cordonPersist":true`...)
	}
	if r.RevokedBy != "" {
		dst = append(dst, `,"revokedBy":`...)
		dst = appendString(dst, r.RevokedBy)
	}
	if r.RevokedReason != "" {
		dst = append(dst, `,"revokedReason":`...)
		dst = appendString(dst, r.RevokedReason)
	}
	if r.CredentialSerial != "" {
		dst = append(dst, `,"credentialSerial":`...)
		dst = appendString(dst, r.CredentialSerial)
	}
	if r.StatusAtUnixMs != 0 {
		dst = append(dst, `,"statusAtUnixMs":`...)
		dst = strconv.AppendInt(dst, r.StatusAtUnixMs, 10)
	}
	if r.HeartbeatAtUnixMs != 0 {
		dst = append(dst, `,"heartbeatAtUnixMs":`...)
		dst = strconv.AppendInt(dst, r.HeartbeatAtUnixMs, 10)
	}
	if r.PlacementVersion != "" {
		dst = append(dst, `,"placementVersion":`...)
		dst = appendString(dst, r.PlacementVersion)
	}
	if r.EligibleWorkers != 0 {
		dst = append(dst, `,"eligibleWorkers":`...)
		dst = strconv.AppendInt(dst, r.EligibleWorkers, 10)
	}
	return append(dst, '}')
}

// label is one member of Record.Labels.
type label struct{ k, v string }

// collectLabels appends the members of labels to kv.
func collectLabels(labels map[string]string, kv []label) []label {
	for k, v := range labels {
		kv = append(kv, label{k, v})
	}
	return kv
}

// collectValidLabels appends the members of labels to kv, and reports
// whether they pass ValidateLabels (and so fit in a buffer of
// MaxLabels): Encode's one pass over the map.
func collectValidLabels(labels map[string]string, kv []label) ([]label, bool) {
	if len(labels) > MaxLabels {
		return kv, false
	}
	ok := true
	for k, v := range labels {
		kv = append(kv, label{k, v})
		ok = ok && validLabel(k, v)
	}
	return kv, ok
}

// sortLabels sorts kv by key, as encoding/json orders a map with string
// keys, and returns it.
func sortLabels(kv []label) []label {
	if len(kv) > MaxLabels {
		// Not from Encode, which validates first.
		slices.SortFunc(kv, func(a, b label) int { return strings.Compare(a.k, b.k) })
		return kv
	}
	// Insertion sort: at most MaxLabels entries, and no closure call
	// per comparison.
	for i := 1; i < len(kv); i++ {
		for j := i; j > 0 && kv[j].k < kv[j-1].k; j-- {
			kv[j], kv[j-1] = kv[j-1], kv[j]
		}
	}
	return kv
}

// encodedSizeHint is the size of r's encoding, with labels kv, when
// nothing in it needs escaping, rounded up: enough for one allocation in
// the common case.
func encodedSizeHint(r *Record, kv []label) int {
	n := 900 + len(r.ClusterID) + len(r.NodeID) + len(r.IncarnationID) + len(r.Address) +
		len(r.AdminAddress) + len(r.Version) + len(r.NotReadyReason)
	for _, l := range kv {
		n += len(l.k) + len(l.v) + 6
	}
	for _, id := range r.Superseded {
		n += len(id) + 3
	}
	return n
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping on (its default): '"', '\\' and control characters
// escaped, '<', '>' and '&' as \u003c, \u003e and \u0026, U+2028 and
// U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i += htmlSafePrefix(s[i:]); i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
