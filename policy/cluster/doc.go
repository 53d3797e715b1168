// Package cluster shares pacegate's caps and release rates between
// gateway replicas through one Redis, so that N replicas enforce a
// tenant's RPM, TPM and burst caps and its pace exactly once, not N
// times.
//
// Caps are leased: a replica takes a few units of a cap from the shared
// counter in one atomic Lua call (every check of a request in the same
// call, all or nothing) and admits from its lease locally until it runs
// out, so most requests make no round trip. Unused units go back after a
// second of idleness, and a window's lease dies with its window. The
// shared counter never exceeds the cap, so neither does the sum of what
// the replicas admit.
//
// Pacing is a shared schedule: a Lua call hands the replica the next
// release slot of the bucket (a shared "next free time"), which the
// replica keeps until that instant. A bucket is released at its rate in
// total, whichever replicas its traffic reaches.
//
// When the store cannot be reached, each replica falls back to what it
// holds and then to cap/N and rate/N of its own (see [Admitter]); it
// probes the store and comes back by itself. [Store] owns the only
// goroutine: [Store.Start] starts it and [Store.Close] stops it.
package cluster
