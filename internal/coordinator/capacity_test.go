package coordinator

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
)

// alarmingStore is a memory store that reports a capacity whose alarms the
// test sets, as the etcd store does from etcd's maintenance API.
type alarmingStore struct {
	*memory.Store
	mu sync.Mutex
	cp state.Capacity
}

func (s *alarmingStore) Capacity() state.Capacity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cp
}

func (s *alarmingStore) set(alarms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cp = state.Capacity{Known: true, DBSizeBytes: 900, DBInUseBytes: 300, QuotaBytes: 1000, Alarms: alarms, CheckedAt: time.Now()}
}

// TestStoreAlarmFailsClosed: an active store alarm makes the coordinator
// unready with the alarm named in words, the talon_store_* gauges show it,
// and clearing it makes the coordinator ready again without a restart.
func TestStoreAlarmFailsClosed(t *testing.T) {
	s := &alarmingStore{Store: memory.New(memory.Options{})}
	s.set()
	f := startWith(t, s, 0)
	waitFor(t, "ready", func() bool { return f.c.Readiness().Ready })

	s.set(state.AlarmNoSpace)
	rd := f.c.Readiness()
	want := "the state store's database is full (etcd alarm NOSPACE): compact, defragment, then disarm the alarm"
	if rd.Ready || !contains(rd.Reasons, want) {
		t.Fatalf("readiness with NOSPACE: %+v, want unready naming %q", rd, want)
	}
	metrics := `
# HELP talon_store_alarm 1 while the state store has the alarm active (etcd: NOSPACE, CORRUPT), else 0.
# TYPE talon_store_alarm gauge
talon_store_alarm{alarm="CORRUPT"} 0
talon_store_alarm{alarm="NOSPACE"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(metrics), "talon_store_alarm"); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{"talon_store_db_size_bytes": 900, "talon_store_db_in_use_bytes": 300, "talon_store_quota_bytes": 1000} {
		if n, err := testutil.GatherAndCount(f.reg, name); err != nil || n != 1 {
			t.Fatalf("%s: %d series, %v", name, n, err)
		}
		mfs, _ := f.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name && mf.GetMetric()[0].GetGauge().GetValue() != v {
				t.Fatalf("%s = %v, want %v", name, mf.GetMetric()[0].GetGauge().GetValue(), v)
			}
		}
	}

	s.set()
	waitFor(t, "ready again once the alarm is disarmed", func() bool { return f.c.Readiness().Ready })
}

// TestStoreCapacityUnknownExportsNothing: before the backend answered,
// no talon_store_* series exists (a quota of 0 would divide by zero in
// the alert), and a store without capacity reports none.
func TestStoreCapacityUnknownExportsNothing(t *testing.T) {
	s := &alarmingStore{Store: memory.New(memory.Options{})}
	f := startWith(t, s, 0)
	if n, err := testutil.GatherAndCount(f.reg, "talon_store_quota_bytes", "talon_store_alarm"); err != nil || n != 0 {
		t.Fatalf("%d series before the first answer, %v", n, err)
	}
	plain := startWith(t, memory.New(memory.Options{}), 0)
	if _, ok := plain.c.StoreCapacity(); ok {
		t.Fatal("the memory store reports a capacity")
	}
}
