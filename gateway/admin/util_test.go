package admin

import (
	"encoding/json"
	"testing"
)

func mustUnmarshal(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
}
