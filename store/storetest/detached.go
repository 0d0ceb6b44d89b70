package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mst-eval/mst/store"
)

// testDetached checks the records of detached runs, for a store that
// keeps them (store.DetachedRecords). A store that does not has nothing
// to check here: the command line refuses --detach with it, saying so.
func testDetached(t *testing.T, s store.Store) {
	d, ok := s.(store.DetachedRecords)
	if !ok {
		t.Logf("%T holds no detached runs", s)
		return
	}
	ctx := t.Context()
	const eval = "weather ☀ eval"
	if ids, err := d.DetachedIDs(ctx, eval); err != nil || len(ids) != 0 {
		t.Fatalf("DetachedIDs of an eval without detached runs = %q, %v; want none", ids, err)
	}
	if _, err := d.GetDetached(ctx, eval, "r1", "status.json", 100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDetached of a record never written = %v, want ErrNotFound", err)
	}
	if ok, err := d.HasDetached(ctx, eval, "r1", "cancel"); ok || err != nil {
		t.Errorf("HasDetached of a record never written = %t, %v; want false", ok, err)
	}
	// Writes replace; two runs and another eval stay apart.
	for _, w := range []struct{ eval, id, name, data string }{
		{eval, "r1", "status.json", `{"state":"starting"}`},
		{eval, "r1", "status.json", `{"state":"running"}`},
		{eval, "r1", "log.txt", "line 1\n"},
		{eval, "r2", "cancel", "someone\n"},
		{"other", "r3", "status.json", "{}"},
	} {
		if err := d.PutDetached(ctx, w.eval, w.id, w.name, []byte(w.data)); err != nil {
			t.Fatalf("PutDetached(%s, %s, %s) = %v", w.eval, w.id, w.name, err)
		}
	}
	got, err := d.GetDetached(ctx, eval, "r1", "status.json", 100)
	if err != nil || string(got) != `{"state":"running"}` {
		t.Errorf("GetDetached after a replace = %q, %v; want the second write", got, err)
	}
	// A record over limit comes back longer than limit, so the caller
	// can refuse it; one within it whole.
	if got, err := d.GetDetached(ctx, eval, "r1", "log.txt", 3); err != nil || len(got) <= 3 || !strings.HasPrefix("line 1\n", string(got)) {
		t.Errorf("GetDetached with a limit of 3 of a 7-byte record = %q, %v; want more than 3 bytes of it", got, err)
	}
	if ok, err := d.HasDetached(ctx, eval, "r2", "cancel"); !ok || err != nil {
		t.Errorf("HasDetached of a written record = %t, %v; want true", ok, err)
	}
	ids, err := d.DetachedIDs(ctx, eval)
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Errorf("DetachedIDs = %q, %v; want r1 and r2 (not the other eval's r3)", ids, err)
	}
	if w := d.DetachedWhere(eval, "r1", "status.json"); !strings.Contains(w, "r1/status.json") {
		t.Errorf("DetachedWhere = %q; want a place that names the run and the record", w)
	}
	// Writers at once: every record lands.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := "c" + string(rune('a'+i))
			if err := d.PutDetached(ctx, eval, id, "status.json", []byte("{}")); err != nil {
				t.Errorf("PutDetached(%s) at once = %v", id, err)
			}
		})
	}
	wg.Wait()
	if ids, err := d.DetachedIDs(ctx, eval); err != nil || len(ids) != 10 {
		t.Errorf("DetachedIDs after 8 writers = %q, %v; want 10 runs", ids, err)
	}
}
