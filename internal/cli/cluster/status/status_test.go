package status

import (
	"testing"

	"github.com/talonhq/talon/internal/apiv1"
)

func TestStoreDatabase(t *testing.T) {
	for _, tc := range []struct {
		cp   apiv1.StoreCapacity
		want string
	}{
		{apiv1.StoreCapacity{DBSizeBytes: 1_530_000, DBInUseBytes: 860_000, QuotaBytes: 2 << 30}, "1.5 MiB of 2.0 GiB (0%), 839.8 KiB in use"},
		{apiv1.StoreCapacity{DBSizeBytes: 14 << 20, DBInUseBytes: 13 << 20, QuotaBytes: 16 << 20}, "14.0 MiB of 16.0 MiB (87%), 13.0 MiB in use"},
		{apiv1.StoreCapacity{DBSizeBytes: 512}, "512 B of 0 B, 0 B in use"},
	} {
		if got := storeDatabase(&tc.cp); got != tc.want {
			t.Errorf("storeDatabase(%+v) = %q, want %q", tc.cp, got, tc.want)
		}
	}
}
