//go:build !unix

package consume_test

// minorFaults is not counted where getrusage is missing.
func minorFaults() int64 { return 0 }
