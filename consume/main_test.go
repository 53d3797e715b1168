package consume_test

import (
	"os"
	"testing"
)

// TestMain runs the tests, unless this process is one of keepAwake's
// spinners.
func TestMain(m *testing.M) {
	spinIfAsked()
	os.Exit(m.Run())
}
