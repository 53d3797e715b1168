package consume

import (
	"strconv"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// A bucket that goes idle and takes a request again, as most do between
// two requests, fills a kept list: the ledger allocates nothing, and the
// bucket holds only its new request.
func TestLedgerReusesEmptiedList(t *testing.T) {
	l := newLedger()
	k := policy.Key{Tenant: "t", Model: "meta-llama/Llama-3.1-8B-Instruct"}
	now := time.Unix(100, 0)
	seq, _, _ := l.add(k, now, 0)
	if !l.remove(k, seq, true, now) {
		t.Fatal("the bucket did not empty")
	}
	allocs := testing.AllocsPerRun(100, func() {
		seq, _, _ = l.add(k, now, 0)
		l.remove(k, seq, true, now)
	})
	if allocs != 0 {
		t.Errorf("an idle bucket's request allocates %v times in the ledger, want 0", allocs)
	}
	seq, backlog, _ := l.add(k, now, 0)
	if backlog != 1 || l.position(k, seq) != 1 {
		t.Errorf("after reuse: backlog %d, position %d; want 1, 1", backlog, l.position(k, seq))
	}
}

// A shard keeps at most spareLists emptied lists, each empty and none
// longer than spareCap: what it holds is bounded whatever its buckets
// held.
func TestLedgerSpareListsBounded(t *testing.T) {
	l := newLedger()
	now := time.Unix(100, 0)
	var keys []policy.Key
	for i := 0; len(keys) < 3*spareLists; i++ { // buckets of shard 0
		k := policy.Key{Tenant: "t" + strconv.Itoa(i), Model: "m"}
		if l.shard(k) == &l.shards[0] {
			keys = append(keys, k)
		}
	}
	big := keys[0] // its list outgrows spareCap
	var bigSeqs []uint64
	for range spareCap + 1 {
		seq, _, _ := l.add(big, now, 0)
		bigSeqs = append(bigSeqs, seq)
	}
	for _, seq := range bigSeqs {
		l.remove(big, seq, false, now)
	}
	if got := l.shards[0].spares; got != 0 {
		t.Fatalf("a list of capacity > %d was kept (%d spares)", spareCap, got)
	}
	seqs := make([]uint64, len(keys))
	for i, k := range keys {
		seqs[i], _, _ = l.add(k, now, 0)
	}
	for i, k := range keys {
		l.remove(k, seqs[i], true, now)
	}
	s := &l.shards[0]
	if s.spares != spareLists {
		t.Fatalf("%d spare lists kept, want %d", s.spares, spareLists)
	}
	for i, sp := range s.spare {
		if len(sp) != 0 || cap(sp) > spareCap {
			t.Errorf("spare %d: len %d cap %d, want empty of capacity <= %d", i, len(sp), cap(sp), spareCap)
		}
	}
}
