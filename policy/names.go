package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest tenant, org or model name accepted, in bytes.
const MaxNameLen = 128

// CheckModelName returns why name is unusable as a model name (the same
// rule applies to tenant and org ids), or nil. Names end up in queue topic
// names, logs and headers, so a name must be non-empty, at most
// [MaxNameLen] bytes of valid UTF-8, without control characters. The
// error text names no field: callers prefix where the name came from.
func CheckModelName(name string) error {
	switch {
	case name == "":
		return errors.New("required")
	case len(name) > MaxNameLen:
		return fmt.Errorf("longer than %d bytes", MaxNameLen)
	case !utf8.ValidString(name):
		return errors.New("not valid UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("contains a control character: %q", name)
	}
	return nil
}
