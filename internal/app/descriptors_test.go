//go:build unix

package app

import (
	"log/slog"
	"syscall"
	"testing"
)

// TestSizeBudgets: the listeners' caps fit the open-files limit less the
// reserve, the admin listener's share at most a fifth of it.
func TestSizeBudgets(t *testing.T) {
	for _, tc := range []struct {
		soft    uint64
		max     int
		want    budgets
		lowered bool
	}{
		{0, 4096, budgets{4096, 1024}, false},
		{1 << 20, 4096, budgets{4096, 1024}, false},
		{1024, 4096, budgets{410, 102}, true},
		{5632, 4096, budgets{4096, 1024}, false},
		{5000, 4096, budgets{3591, 897}, true},
	} {
		got, lowered := sizeBudgets(tc.soft, tc.max)
		if got != tc.want || lowered != tc.lowered {
			t.Errorf("sizeBudgets(%d, %d) = %+v, %v; want %+v, %v", tc.soft, tc.max, got, lowered, tc.want, tc.lowered)
		}
		if tc.soft > 0 && uint64(got.Main+got.Admin) > max(tc.soft-reservedDescriptors, 64) {
			t.Errorf("sizeBudgets(%d, %d) = %+v: past the limit less the reserve", tc.soft, tc.max, got)
		}
	}
}

// TestRaiseNoFile: a soft limit below the hard one is raised to it.
func TestRaiseNoFile(t *testing.T) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Skip(err)
	}
	if r.Max < 2048 {
		t.Skipf("hard limit %d too low to lower the soft one", r.Max)
	}
	low := r
	low.Cur = 1024
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r) })
	b := descriptorBudgets(4096, slog.New(slog.DiscardHandler))
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != r.Max {
		t.Fatalf("soft limit %d after raising, want the hard limit %d", now.Cur, r.Max)
	}
	if want, _ := sizeBudgets(now.Cur, 4096); b != want {
		t.Fatalf("budgets %+v, want %+v", b, want)
	}
}
