package run

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/eval"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/transcript"
)

// TestPlacement places the remaining trials of a plan of 40 cases on 4
// shards under each kind of recorded split: the recorded deal (its
// digest right, or absent) and the old hash rule put every case where
// they did; a wrong digest, an unknown method or another shard count
// deal the remaining cases afresh, the first two saying why.
func TestPlacement(t *testing.T) {
	t.Parallel()
	var keys []transcript.Key
	for i := range 40 {
		for trial := 1; trial <= 3; trial++ {
			keys = append(keys, transcript.Key{Case: fmt.Sprintf("case-%02d", i), Variant: "v", Trial: trial})
		}
	}
	// What is left: the trials of every fourth case, and one trial of
	// case-01.
	var todo []transcript.Key
	for _, k := range keys {
		var i int
		fmt.Sscanf(k.Case, "case-%d", &i)
		if i%4 == 0 || k.Case == "case-01" && k.Trial == 1 {
			todo = append(todo, k)
		}
	}
	p := &Plan{Variants: []string{"v"}, Trials: 3}
	for i := range 40 {
		p.Cases = append(p.Cases, dataset.Case{ID: fmt.Sprintf("case-%02d", i)})
	}
	if diff := cmp.Diff(keys, p.Keys()); diff != "" {
		t.Fatalf("the plan's keys (-want +got):\n%s", diff)
	}
	all, digest := deal(seriesOfKeys(keys), 4)
	restrict := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for _, k := range todo {
			out[k.Case] = m[k.Case]
		}
		return out
	}
	mod := map[string]int{}
	for _, k := range todo {
		mod[k.Case] = shard.Assign(k.Case, 4)
	}
	fresh := CaseShards(todo, 4)
	if maps.Equal(fresh, restrict(all)) {
		t.Fatal("a fresh deal of the remaining cases agrees with the recorded one; the test needs them to differ")
	}
	tests := []struct {
		name string
		rec  *transcript.Split
		want map[string]int
		why  string
	}{
		{"the recorded deal", &transcript.Split{Method: transcript.SplitDeal, Shards: 4, Digest: digest}, restrict(all), ""},
		{"a deal recorded without a digest", &transcript.Split{Method: transcript.SplitDeal, Shards: 4}, restrict(all), ""},
		{"the old hash rule", &transcript.Split{Method: transcript.SplitMod, Shards: 4}, mod, ""},
		{"a wrong digest", &transcript.Split{Method: transcript.SplitDeal, Shards: 4, Digest: "0000000000000000"}, fresh, "cases file was changed"},
		{"an unknown method", &transcript.Split{Method: "by-duration", Shards: 4}, fresh, `split method "by-duration"`},
		{"another shard count", &transcript.Split{Method: transcript.SplitDeal, Shards: 2, Digest: digest}, fresh, ""},
		{"no record", nil, fresh, ""},
	}
	for _, tt := range tests {
		where, why := p.placement(tt.rec, seriesOfKeys(todo), 4)
		if got := restrict(where); !maps.Equal(got, tt.want) {
			t.Errorf("placement(%s, 4 shards) = %v, want %v", tt.name, got, tt.want)
		}
		if tt.why == "" && why != "" || tt.why != "" && !strings.Contains(why, tt.why) {
			t.Errorf("placement(%s, 4 shards) says %q, want %q", tt.name, why, tt.why)
		}
	}
	if where, _ := p.placement(&transcript.Split{Method: transcript.SplitDeal, Shards: 1}, seriesOfKeys(todo), 1); where != nil {
		t.Errorf("placement(one shard) = %v, want nil (all on shard 0)", where)
	}
}

// TestSplitSize: a plan's bundles hold series, not trials, so what a
// shard's bundle holds (and what its worker and coordinator keep of it)
// does not grow with the trials per case: 14 cases × 2 variants × 5,000
// trials on 4 shards make bundles of 28 series in all, each bundle a few
// kilobytes, and every planned trial is in exactly one of them, in the
// plan's order.
func TestSplitSize(t *testing.T) {
	t.Parallel()
	p := &Plan{Config: &eval.Config{}, Variants: []string{"terse", "clear"}, Trials: 5000, settingOf: map[settingKey]int{}}
	for i, v := range p.Variants {
		p.Settings = append(p.Settings, shard.Setting{Variant: v, Client: "api", Model: "offline"})
		p.settingOf[settingKey{v, ""}] = i
	}
	for i := range 14 {
		p.Cases = append(p.Cases, dataset.Case{ID: fmt.Sprintf("weather-%02d-日本", i), Input: "What is the weather?"})
	}
	// One case overrides the model: a setting of its own.
	p.Settings = append(p.Settings, shard.Setting{Variant: "clear", Client: "api", Model: "offline-2"})
	p.settingOf[settingKey{"clear", p.Cases[3].ID}] = 2

	bundles := p.split(transcript.Run{ID: "r"}, p.todo(), 4)
	seen, series := 0, 0
	for _, b := range bundles {
		series += len(b.Series)
		dir := t.TempDir()
		if err := shard.WriteBundle(dir, b); err != nil {
			t.Fatal(err)
		}
		got, err := shard.ReadBundle(dir)
		if err != nil {
			t.Fatalf("ReadBundle(shard %d) = %v", b.Shard, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "bundle.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > 8<<10 {
			t.Errorf("shard %d's bundle of %d trials takes %d bytes, want at most 8 KiB", b.Shard, b.Size(), len(raw))
		}
		for pt := range got.Trials() {
			set := got.Settings[pt.Setting]
			wantModel := "offline"
			if pt.Case == p.Cases[3].ID && pt.Variant == "clear" {
				wantModel = "offline-2"
			}
			if set.Variant != pt.Variant || set.Model != wantModel {
				t.Fatalf("trial %s runs with setting %+v, want variant %s, model %s", pt.Key, set, pt.Variant, wantModel)
			}
			seen++
		}
	}
	if want := 14 * 2 * 5000; seen != want || series != 28 {
		t.Errorf("the bundles hold %d trials in %d series, want %d in 28", seen, series, want)
	}
}
