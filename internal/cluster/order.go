package cluster

import "slices"

// MaxSuperseded bounds Record.Superseded: the incarnations a slot
// remembers, so that their delayed messages are refused after a restart.
// Four outlive any realistic burst of restarts within one request timeout.
const MaxSuperseded = 4

// Update says what an update may do to a slot.
type Update uint8

// Updates. A registration (the Register message, a process's first write)
// may create a slot or take it over from another incarnation; a heartbeat
// only advances the incarnation that holds the slot.
const (
	UpdateRegister  Update = iota + 1
	UpdateHeartbeat        // the zero Update counts as a registration
)

// Decision is the outcome of applying the ordering rule to an update.
type Decision uint8

// Decisions of Order. Insert, Restart and Advance are accepted; the others
// are idempotently ignored and are not errors.
const (
	DecisionInsert       Decision = iota + 1 // no record existed; a registration
	DecisionRestart                          // a registration of a new incarnation: the process restarted
	DecisionAdvance                          // same incarnation, greater sequence
	DecisionDuplicate                        // same incarnation, same sequence
	DecisionStale                            // same incarnation, smaller sequence
	DecisionSuperseded                       // an incarnation the slot no longer belongs to
	DecisionUnregistered                     // a heartbeat for a slot with no record: register first
)

// Accepted reports whether the update replaces the stored record.
func (d Decision) Accepted() bool {
	return d == DecisionInsert || d == DecisionRestart || d == DecisionAdvance
}

// String returns the decision's lowercase name.
func (d Decision) String() string {
	switch d {
	case DecisionInsert:
		return "insert"
	case DecisionRestart:
		return "restart"
	case DecisionAdvance:
		return "advance"
	case DecisionDuplicate:
		return "duplicate"
	case DecisionStale:
		return "stale"
	case DecisionSuperseded:
		return "superseded"
	case DecisionUnregistered:
		return "unregistered"
	}
	return "invalid"
}

// Order applies the ordering rule (ADR 0001 section 3, as amended in
// docs/adr-0001-management-plane-ha.md) to an update u of incoming for the
// slot whose current record is stored (nil when there is none):
//
//   - same incarnation: accepted when the sequence is greater, a duplicate
//     when equal, stale when smaller;
//   - no record: a registration inserts; a heartbeat is refused as
//     unregistered (its sender registers again);
//   - another incarnation: a registration is a restart unless the incoming
//     incarnation is one the slot has superseded, or, while the holder is
//     not marked late, started before the holder did (StartTimeUnixMs,
//     when both are known) or gives no start time: a delayed registration
//     of an older process, or one that proves nothing about its age; a
//     heartbeat is refused as superseded.
//
// A restart is recognised by the registration that starts every
// incarnation. A delayed heartbeat of a dead process can therefore never
// take a slot. A delayed registration of one is refused once its successor
// holds it, whatever the number of restarts in between: the superseded
// list catches the last MaxSuperseded exactly, and the start time catches
// every older one (a crash loop restarts on one host, so its start times
// come from one clock). The start-time rule compares two hosts' clocks only
// when a node moves hosts; a restart on a host whose clock is behind the
// old host's by more than the restart gap is refused only until the dead
// process's record is marked late (unhealthy-after), never for the lease.
func Order(stored, incoming *Record, u Update) Decision {
	heartbeat := u == UpdateHeartbeat
	switch {
	case stored == nil && heartbeat:
		return DecisionUnregistered
	case stored == nil:
		return DecisionInsert
	case stored.IncarnationID != incoming.IncarnationID:
		if heartbeat || slices.Contains(stored.Superseded, incoming.IncarnationID) || (mayBeOlder(incoming, stored) && !stored.Late) {
			return DecisionSuperseded
		}
		return DecisionRestart
	case incoming.HeartbeatSeq > stored.HeartbeatSeq:
		return DecisionAdvance
	case incoming.HeartbeatSeq == stored.HeartbeatSeq:
		return DecisionDuplicate
	default:
		return DecisionStale
	}
}

// startedBefore reports whether a started before b, by their start
// times; a zero (unknown) start time compares with nothing.
func startedBefore(a, b *Record) bool {
	return a.StartTimeUnixMs != 0 && b.StartTimeUnixMs != 0 && a.StartTimeUnixMs < b.StartTimeUnixMs
}

// mayBeOlder reports whether incoming may be an older process than the
// holder stored: it started before it, or it gives no start time at all
// (every Talon process sends one; a registration without one proves
// nothing about its age, so it never displaces a live, on-time holder:
// ADR 0001's ordering rule gives the live holder precedence).
func mayBeOlder(incoming, stored *Record) bool {
	return incoming.StartTimeUnixMs == 0 || startedBefore(incoming, stored)
}

// Next returns the record a store writes for an accepted decision d of
// incoming over prev, the slot's last known record (the stored one, or an
// expired one a backend still holds; nil when none): a copy of incoming
// with the store-issued fields set. floor is a backend's lower bound for a
// new generation (0 when it has none); a registration's generation is
// above both floor and prev's. A registration over prev supersedes prev's
// incarnation.
func Next(prev, incoming *Record, d Decision, floor uint64) *Record {
	next := incoming.Clone()
	next.Late = false // store-issued: an accepted update is on time
	var prevGen uint64
	var superseded []string
	if prev != nil {
		prevGen = prev.Generation
		superseded = prev.Superseded
	}
	carryMarks(prev, next, d)
	switch {
	case d == DecisionAdvance:
		next.Generation = prevGen
		next.Superseded = slices.Clone(superseded)
	default: // Insert or Restart: a registration
		next.Generation = max(prevGen, floor) + 1
		next.Superseded = nil
		if prev != nil && prev.IncarnationID != incoming.IncarnationID {
			next.Superseded = append(next.Superseded, prev.IncarnationID)
		}
		for _, id := range superseded {
			if len(next.Superseded) == MaxSuperseded {
				break
			}
			if id != incoming.IncarnationID && !slices.Contains(next.Superseded, id) {
				next.Superseded = append(next.Superseded, id)
			}
		}
	}
	return next
}

// carryMarks sets next's operator and coordinator marks (SetMarks), which
// the process does not own: an advance keeps the slot's; a registration
// keeps the slot's cordon (the node's, whatever its incarnation), or takes
// the process's own for a new record (a cordon it persisted across a
// restart), and starts unrevoked unless it comes with the revoked
// credential: a revocation is of a credential (the coordinator sets
// CredentialSerial from the connection), so registering a new incarnation
// with it, through a coordinator without the deny entry, does not lift it
// (issue 47: a worker deny-listed on one coordinator re-registered
// through another and was placed a third of the time).
func carryMarks(prev, next *Record, d Decision) {
	if d == DecisionAdvance && prev != nil {
		next.CordonedBy, next.CordonedAtUnixMs, next.CordonPersist = prev.CordonedBy, prev.CordonedAtUnixMs, prev.CordonPersist
		next.RevokedBy, next.RevokedReason = prev.RevokedBy, prev.RevokedReason
		return
	}
	next.RevokedBy, next.RevokedReason = "", ""
	if prev == nil {
		return
	}
	next.CordonedBy, next.CordonedAtUnixMs, next.CordonPersist = prev.CordonedBy, prev.CordonedAtUnixMs, prev.CordonPersist
	if prev.Revoked() && prev.CredentialSerial != "" && prev.CredentialSerial == next.CredentialSerial {
		next.RevokedBy, next.RevokedReason = prev.RevokedBy, prev.RevokedReason
	}
}
