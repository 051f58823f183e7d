package cluster

// Decision is the outcome of applying the ordering rule to an update.
type Decision uint8

// Decisions of Order. Insert, Restart and Advance are accepted; Duplicate
// and Stale are idempotently ignored and are not errors.
const (
	DecisionInsert    Decision = iota + 1 // no record existed
	DecisionRestart                       // a different incarnation: the process restarted
	DecisionAdvance                       // same incarnation, greater sequence
	DecisionDuplicate                     // same incarnation, same sequence
	DecisionStale                         // same incarnation, smaller sequence; or an older process
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
	}
	return "invalid"
}

// Order applies the ADR section 3 rule to an incoming update for the slot
// whose current record is stored (nil when there is none). It accepts when
// no record exists, when the incarnation differs, or when the incarnation
// matches and the sequence is greater; otherwise the update is a duplicate
// (equal sequence) or stale (smaller sequence).
//
// One refinement of the ADR rule: a different incarnation whose process
// started before the stored one (StartTimeUnixMs smaller) is stale, not a
// restart. Without it, a heartbeat the old process sent just before it died,
// delayed through another coordinator, would replace the new process's
// record and move the slot backward, which is exactly what the ordering rule
// exists to prevent. Equal or unknown (zero) start times keep the ADR
// behaviour: any other incarnation is a restart.
func Order(stored, incoming *Record) Decision {
	switch {
	case stored == nil:
		return DecisionInsert
	case stored.IncarnationID != incoming.IncarnationID:
		if incoming.StartTimeUnixMs < stored.StartTimeUnixMs {
			return DecisionStale
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
