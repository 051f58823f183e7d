package testsupport_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/testsupport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFakeClock(t *testing.T) {
	t0 := time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC)
	c := testsupport.NewFakeClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	time.Sleep(5 * time.Millisecond)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("the clock moved on its own: %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), t0.Add(800*time.Second); !got.Equal(want) {
		t.Fatalf("after 800 concurrent advances of 1s: %v, want %v", got, want)
	}
	c.Set(t0.Add(-time.Hour))
	if got, want := c.Now(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("after Set backwards: %v, want %v", got, want)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b testsupport.SyncBuffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 50 {
				if n, err := fmt.Fprintf(&b, "%d", i); n != 1 || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	got := b.String()
	if len(got) != 200 {
		t.Fatalf("%d bytes written, want 200: %q", len(got), got)
	}
	for i := range 4 {
		if n := strings.Count(got, fmt.Sprint(i)); n != 50 {
			t.Errorf("%d writes of %d, want 50", n, i)
		}
	}
}

// fatalTB is a testing.TB whose Fatalf sends its message on fatal and
// then ends the goroutine, as testing.T's does.
type fatalTB struct {
	testing.TB
	fatal chan<- string
}

func (fatalTB) Helper() {}

func (f fatalTB) Fatalf(format string, args ...any) {
	f.fatal <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitFor(t *testing.T) {
	t.Run("condition met", func(t *testing.T) {
		calls := 0
		testsupport.WaitFor(t, 5*time.Second, "three calls", func() bool { calls++; return calls == 3 })
		if calls != 3 {
			t.Fatalf("cond called %d times, want 3", calls)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		fatal := make(chan string, 1)
		returned := make(chan struct{})
		start := time.Now()
		go func() {
			testsupport.WaitFor(fatalTB{TB: t, fatal: fatal}, 100*time.Millisecond, "nothing", func() bool { return false })
			close(returned)
		}()
		select {
		case msg := <-fatal:
			if want := "timed out after 100ms waiting for nothing"; msg != want {
				t.Fatalf("failure %q, want %q", msg, want)
			}
		case <-returned:
			t.Fatal("WaitFor returned although the condition never held")
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("gave up after %v, before the timeout", d)
		}
	})
}

func TestForgeCRC32C(t *testing.T) {
	data := bytes.Repeat([]byte("talon block "), 1000)
	forged := testsupport.ForgeCRC32C(data, 5, 100)
	tab := crc32.MakeTable(crc32.Castagnoli)
	if bytes.Equal(forged, data) || crc32.Checksum(forged, tab) != crc32.Checksum(data, tab) || !bytes.Equal(forged[104:], data[104:]) {
		t.Fatalf("forged bytes differ %t, same CRC %t", !bytes.Equal(forged, data), crc32.Checksum(forged, tab) == crc32.Checksum(data, tab))
	}
}

func TestForgeCRC64NVME(t *testing.T) {
	data := bytes.Repeat([]byte("talon block "), 1000)
	forged := testsupport.ForgeCRC64NVME(data, 5, 100)
	tab := crc64.MakeTable(0x9a6c9329ac4bc9b5)
	if bytes.Equal(forged, data) || crc64.Checksum(forged, tab) != crc64.Checksum(data, tab) {
		t.Fatalf("forged bytes differ %t, same CRC %t", !bytes.Equal(forged, data), crc64.Checksum(forged, tab) == crc64.Checksum(data, tab))
	}
}
