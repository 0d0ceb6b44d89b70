package run

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// A worker that lies: its trial message names one trial and the bytes it
// sends are another's, or not a transcript at all. Nothing is stored.
func TestCollectorRefusesWhatAWorkerMisreports(t *testing.T) {
	t.Parallel()
	st := store.OpenDir(t.TempDir(), nil)
	col := &collector{st: st, plan: &Plan{}, logger: slog.New(slog.DiscardHandler)}
	reported := transcript.Key{Case: "a", Variant: "v", Trial: 1}
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"another trial's transcript", `{"kind":"mst.transcript","version":1,"case":"b","variant":"v","trial":1}`, "sent the transcript of"},
		{"not JSON", `{"kind":`, "the worker's transcript"},
	} {
		_, err := col.take(t.Context(), reported, []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("take(%s) = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	col.Trial(0, &protocol.Trial{Key: reported}, []byte(`{"case":"b","variant":"v","trial":1}`))
	if keys, err := st.Keys(t.Context()); err != nil || len(keys) != 0 {
		t.Errorf("after misreported trials the store holds %v (%v), want nothing", keys, err)
	}
	if n := col.total(); n != 0 {
		t.Errorf("misreported trials counted %d, want 0", n)
	}
}
