package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talonhq/talon/internal/state"
)

// Capacity polling bounds.
const (
	// DefaultCapacityInterval is how often a store with capacity polling
	// asks etcd for its database size and alarms.
	DefaultCapacityInterval = 30 * time.Second
	// alarmCapacityInterval is the poll interval while an alarm is active,
	// so that the operator's disarm is seen within seconds.
	alarmCapacityInterval = 2 * time.Second
	// minCapacityGap is the least time between two polls, however many
	// writes fail with "database space exceeded" meanwhile.
	minCapacityGap = time.Second
	// DefaultQuotaBytes is etcd's default --quota-backend-bytes, assumed
	// when a server does not report its quota (etcd before 3.6).
	DefaultQuotaBytes = 2 << 30
)

// capacityMonitor keeps the last answer of etcd's maintenance Status (each
// endpoint) and AlarmList. Its goroutine polls every interval, more often
// while an alarm is active, and at once (at most once per minCapacityGap)
// when a request failed because the database is full.
type capacityMonitor struct {
	s        *Store
	interval time.Duration
	kick     chan struct{} // one slot: a poll is wanted now

	mu   sync.Mutex // guards last
	last state.Capacity
}

func newCapacityMonitor(s *Store, interval time.Duration) *capacityMonitor {
	return &capacityMonitor{s: s, interval: interval, kick: make(chan struct{}, 1)}
}

// Capacity returns the database size, quota and alarms etcd reported last
// (state.CapacityReporter). Known is false when polling is off
// (Options.CapacityInterval) or etcd has not answered yet.
func (s *Store) Capacity() state.Capacity {
	if s.capacity == nil {
		return state.Capacity{}
	}
	return s.capacity.get()
}

func (m *capacityMonitor) get() state.Capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.last
	c.Alarms = slices.Clone(c.Alarms)
	return c
}

// wake asks for a poll now; it never blocks.
func (m *capacityMonitor) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run polls until the store closes.
func (m *capacityMonitor) run() {
	ctx := m.s.lifetime
	for {
		m.poll(ctx)
		gap := time.NewTimer(minCapacityGap)
		select {
		case <-ctx.Done():
			gap.Stop()
			return
		case <-gap.C:
		}
		next := time.NewTimer(nextCapacityPoll(m.interval, len(m.get().Alarms) > 0) - minCapacityGap)
		select {
		case <-ctx.Done():
			next.Stop()
			return
		case <-next.C:
		case <-m.kick:
			next.Stop()
		}
	}
}

// nextCapacityPoll is the time from one poll to the next.
func nextCapacityPoll(interval time.Duration, alarmed bool) time.Duration {
	if alarmed {
		interval = min(interval, alarmCapacityInterval)
	}
	return max(interval, minCapacityGap)
}

// poll asks every endpoint for its status and the cluster for its alarms.
// What fails keeps its last value; it is logged at debug level only (the
// store's own reads report an unreachable etcd).
func (m *capacityMonitor) poll(ctx context.Context) {
	statuses := make([]*clientv3.StatusResponse, 0, len(m.s.opts.Endpoints))
	for _, ep := range m.s.opts.Endpoints {
		// Each call has its own deadline: a member that is down costs one
		// request timeout and does not starve the others.
		cctx, cancel := context.WithTimeout(ctx, m.s.opts.RequestTimeout)
		st, err := m.s.client.Status(cctx, ep)
		cancel()
		if err != nil {
			m.s.log.Debug("etcd status failed", "endpoint", ep, "err", err)
			continue
		}
		statuses = append(statuses, st)
	}
	actx, cancel := context.WithTimeout(ctx, m.s.opts.RequestTimeout)
	alarms, alarmErr := m.s.client.AlarmList(actx)
	cancel()
	if alarmErr != nil {
		m.s.log.Debug("etcd alarm list failed", "err", alarmErr)
	}
	if len(statuses) == 0 && alarmErr != nil {
		return
	}
	m.mu.Lock()
	prev := m.last
	next := prev
	if len(statuses) > 0 {
		next.DBSizeBytes, next.DBInUseBytes, next.QuotaBytes = fullest(statuses)
	}
	if alarmErr == nil {
		next.Alarms = alarmNames(alarms.Alarms)
	}
	next.Known, next.CheckedAt = true, m.s.clock()
	m.last = next
	m.mu.Unlock()
	m.logAlarmChange(prev.Alarms, next.Alarms)
}

// logAlarmChange logs alarms raised and cleared.
func (m *capacityMonitor) logAlarmChange(prev, next []string) {
	for _, a := range next {
		if !slices.Contains(prev, a) {
			m.s.log.Error("etcd alarm active", "alarm", a, "meaning", state.AlarmMessage(a))
		}
	}
	for _, a := range prev {
		if !slices.Contains(next, a) {
			m.s.log.Info("etcd alarm cleared", "alarm", a)
		}
	}
}

// fullest returns the size, size in use and quota of the member closest
// to its quota: the first to reach it raises NOSPACE for the whole
// cluster. A member that does not report its quota has etcd's default.
func fullest(statuses []*clientv3.StatusResponse) (size, inUse, quota int64) {
	best := -1.0
	for _, st := range statuses {
		q := st.DbSizeQuota
		if q <= 0 {
			q = DefaultQuotaBytes
		}
		if ratio := float64(st.DbSize) / float64(q); ratio > best {
			best, size, inUse, quota = ratio, st.DbSize, st.DbSizeInUse, q
		}
	}
	return size, inUse, quota
}

// alarmNames returns the distinct alarm types, sorted.
func alarmNames(ms []*pb.AlarmMember) []string {
	var out []string
	for _, a := range ms {
		if a == nil || a.Alarm == pb.AlarmType_NONE {
			continue
		}
		if n := a.Alarm.String(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// noteNoSpace asks for a poll when err says etcd refused a request because
// its database is full (the conn's noSpace hook).
func (m *capacityMonitor) noteNoSpace(err error) {
	if isNoSpace(err) {
		m.wake()
	}
}

// isNoSpace reports whether err is etcd's "database space exceeded".
func isNoSpace(err error) bool {
	return errors.Is(rpctypes.Error(err), rpctypes.ErrNoSpace) ||
		strings.Contains(err.Error(), "database space exceeded")
}
