package integration

import (
	"testing"

	"github.com/talonhq/talon/internal/testsupport/talontest"
)

// TestMain builds the talon binary once for the package's tests (see
// talontest.Main).
func TestMain(m *testing.M) { talontest.Main(m) }
