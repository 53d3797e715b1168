package embedded

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// An acknowledged message's entry carries the next message, and nothing
// of its own: the second delivery is the very same *Delivery, holding the
// second message alone.
func TestEntryReusedForNextMessage(t *testing.T) {
	e := New(Config{Workers: 1, Logger: quiet, InlineDelivery: true})
	var seen []*consume.Delivery
	var got []consume.Delivery
	if err := e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		seen, got = append(seen, d), append(got, *d) // inline: on the test's goroutine
		return consume.Success()
	}); err != nil {
		t.Fatal(err)
	}
	first := msg("t", "a")
	first.Properties = map[string]string{"trace": "a"}
	mustPublish(t, e, first)
	mustPublish(t, e, msg("u", "b"))
	mustClose(t, e)

	want := []consume.Delivery{
		{Message: *first, Attempt: 1, Inline: true},
		{Message: consume.Message{ID: "b", LiteTopic: "u", Body: []byte("b")}, Attempt: 1, Inline: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deliveries %+v, want %+v", got, want)
	}
	if seen[0] != seen[1] {
		t.Fatal("the second message got a new entry; the first one's was not reused")
	}
}

// The engine keeps at most maxSpareEntries acknowledged entries, and
// each holds no message.
func TestSpareEntriesBounded(t *testing.T) {
	e := New(Config{Workers: 2, Logger: quiet})
	const n = maxSpareEntries + 44
	for i := range n { // queued before Start: n entries live at once
		mustPublish(t, e, msg("t", strconv.Itoa(i)))
	}
	var wg sync.WaitGroup
	wg.Add(n)
	if err := e.Start(func(context.Context, *consume.Delivery) consume.Result {
		wg.Done()
		return consume.Success()
	}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mustClose(t, e) // settled: every message acknowledged
	if len(e.spare.free) != maxSpareEntries {
		t.Fatalf("%d spare entries kept, want %d", len(e.spare.free), maxSpareEntries)
	}
	for _, en := range e.spare.free {
		if en.d.Body != nil || en.d.ID != "" || en.next != nil {
			t.Fatalf("a spare entry holds %+v", en)
		}
	}
}
