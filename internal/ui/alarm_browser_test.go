package ui

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/talonhq/talon/internal/state"
	"github.com/talonhq/talon/internal/state/memory"
	"github.com/talonhq/talon/internal/testsupport/coordtest"
)

// alarmStore is a memory store reporting a capacity whose alarms the test
// sets, as the etcd store does from etcd's maintenance API.
type alarmStore struct {
	*memory.Store
	mu     sync.Mutex
	alarms []string
}

func (s *alarmStore) Capacity() state.Capacity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return state.Capacity{Known: true, DBSizeBytes: 2 << 30, DBInUseBytes: 1 << 30, QuotaBytes: 2 << 30, Alarms: s.alarms, CheckedAt: time.Now()}
}

func (s *alarmStore) set(alarms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alarms = alarms
}

// TestBrowserNamesStoreAlarm: while the store has raised NOSPACE the
// coordinator fails closed, and the page says in words that the store's
// database is full and what to do, in the Store field and the banner;
// once the alarm is disarmed the page is live again.
func TestBrowserNamesStoreAlarm(t *testing.T) {
	bin := chromium(t)
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	s := &alarmStore{Store: mem}
	adm := exposeAll()
	c := coordtest.Start(t, coordtest.Options{
		ClusterID: clusterID, NodeID: "coord-a", Timing: testTiming,
		RequestTimeout: 300 * time.Millisecond, ShutdownTimeout: time.Second,
		Store: s, WaitReady: true, Admin: &adm, UI: Handler(),
	})
	b := newBrowser(t, bin)
	b.do("opening the page", chromedp.Navigate(c.AdminURL+"/"))
	b.waitFor("the store healthy", `document.getElementById("store").textContent === "memory · healthy"`)

	s.set(state.AlarmNoSpace)
	words := state.AlarmMessage(state.AlarmNoSpace)
	b.waitFor("the alarm in the Store field", `document.getElementById("store").textContent.includes("etcd alarm NOSPACE")`)
	if got := b.text("#store"); got != "memory · "+words {
		t.Errorf("store %q, want the alarm in words", got)
	}
	b.waitFor("the STALE banner", jsBannerShown)
	if got := b.text("#banner-error"); !strings.Contains(got, words) {
		t.Errorf("banner error %q does not name the alarm", got)
	}
	b.screenshot("store-alarm")

	s.set()
	b.waitFor("the banner to go", `document.getElementById("banner").hidden`)
	if got := b.text("#store"); got != "memory · healthy" {
		t.Errorf("store %q after the disarm", got)
	}
}
