package state

import (
	"slices"
	"time"
)

// Capacity is how full a backend's database is, as the backend last told
// a coordinator. Backends that can say (etcd's maintenance Status and
// AlarmList) implement CapacityReporter; the others report nothing.
type Capacity struct {
	// Known is false until the backend answered once.
	Known bool
	// DBSizeBytes is the database file's size, what the backend's quota
	// counts (etcd's dbSize: it shrinks only by defragmentation).
	DBSizeBytes int64
	// DBInUseBytes is the part of it holding live data and kept history
	// (etcd's dbSizeInUse: compaction frees space inside the file).
	DBInUseBytes int64
	// QuotaBytes is the size at which the backend refuses writes (etcd's
	// --quota-backend-bytes); 0 when unknown.
	QuotaBytes int64
	// Alarms are the backend's active alarms, sorted, deduplicated
	// (etcd: NOSPACE, CORRUPT).
	Alarms []string
	// CheckedAt is when the backend answered last.
	CheckedAt time.Time
}

// CapacityReporter is a store that knows its backend's capacity and
// alarms. Capacity returns the last answer without I/O; the store refreshes
// it in the background.
type CapacityReporter interface {
	Capacity() Capacity
}

// Store alarms, as etcd names them.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// KnownAlarms are the alarms exported as metrics series from the start;
// others a backend raises are exported as they appear.
func KnownAlarms() []string { return []string{AlarmNoSpace, AlarmCorrupt} }

// AlarmMessage says in words what an active store alarm means and what the
// operator does about it.
func AlarmMessage(alarm string) string {
	switch alarm {
	case AlarmNoSpace:
		return "the state store's database is full (etcd alarm NOSPACE): compact, defragment, then disarm the alarm"
	case AlarmCorrupt:
		return "the state store reports data corruption (etcd alarm CORRUPT): restore the corrupted member from a healthy one, then disarm the alarm"
	}
	return "the state store raised alarm " + alarm + ": see the store's documentation, then disarm the alarm"
}

// Problems returns AlarmMessage of each active alarm, in order.
func (c Capacity) Problems() []string {
	out := make([]string, 0, len(c.Alarms))
	for _, a := range c.Alarms {
		out = append(out, AlarmMessage(a))
	}
	return out
}

// HasAlarm reports whether alarm is active.
func (c Capacity) HasAlarm(alarm string) bool { return slices.Contains(c.Alarms, alarm) }
