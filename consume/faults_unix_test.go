//go:build unix

package consume_test

import "syscall"

// minorFaults is how many minor page faults the process has taken.
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}
