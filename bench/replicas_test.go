package main

import (
	"slices"
	"testing"
)

// TestInOrder: the latency rounds' pairs run with first, then without
// first, in turn.
func TestInOrder(t *testing.T) {
	var got []string
	for i := range 4 {
		inOrder(i%2 == 0, func() { got = append(got, "with") }, func() { got = append(got, "without") })
	}
	want := []string{"with", "without", "without", "with", "with", "without", "without", "with"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
