package shard_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/servers"
	"github.com/mst-eval/mst/transcript"
)

// planBundle is a bundle as the plan makes one: variant "fast" with a
// case-level setting for case "b" (another model), variant "slow" with a
// timeout, a key variable and a server.
func planBundle() *shard.Bundle {
	desc := "what the weather is"
	return &shard.Bundle{
		Run:   transcript.Run{ID: "run-1"},
		Shard: 1,
		Settings: []shard.Setting{
			{Variant: "fast", Client: "api", Model: "anthropic/claude-haiku", Provider: "anthropic", Options: json.RawMessage(`{"maxTokens":100}`)},
			{Variant: "fast", Client: "api", Model: "anthropic/claude-sonnet", Provider: "anthropic", Options: json.RawMessage(`{"maxTokens":200}`)},
			{Variant: "slow", Client: "api", Model: "openai/gpt", Provider: "openai", Timeout: 90 * time.Second, KeyEnv: "OTHER_KEY",
				Servers: []servers.Server{{Name: "weather", Command: "/bin/weather", Args: []string{"--stdio"}, StartupTimeout: 5 * time.Second,
					Tools: map[string]servers.ToolOverride{"forecast": {Description: &desc}}}}},
		},
		Cases: []dataset.Case{
			{ID: "a", Input: "weather today?", Metadata: map[string]any{"tag": "x"}},
			{ID: "b", Input: "weather tomorrow?", Model: "anthropic/claude-sonnet"},
		},
		Series: shard.SeriesOf(
			shard.Planned{Key: transcript.Key{Case: "a", Variant: "fast", Trial: 1}, Setting: 0},
			shard.Planned{Key: transcript.Key{Case: "b", Variant: "fast", Trial: 1}, Setting: 1, Replace: true},
			shard.Planned{Key: transcript.Key{Case: "a", Variant: "slow", Trial: 1}, Setting: 2},
			shard.Planned{Key: transcript.Key{Case: "a", Variant: "slow", Trial: 2}, Setting: 2},
		),
		Concurrency: 3,
	}
}

// TestBundleRoundTrip writes a bundle with WriteBundle and reads it back
// with ReadBundle: every field survives, and the format is this MST's.
func TestBundleRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bundle")
	b := planBundle()
	if err := shard.WriteBundle(dir, b); err != nil {
		t.Fatalf("WriteBundle: %v", err)
	}
	got, err := shard.ReadBundle(dir)
	if err != nil {
		t.Fatalf("ReadBundle(WriteBundle(a bundle of %d settings, %d trials)) = %v", len(b.Settings), b.Size(), err)
	}
	want := planBundle()
	want.Format = shard.BundleFormat
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadBundle(WriteBundle(b)) differs from b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Keys(), got.Keys()); diff != "" {
		t.Errorf("Keys() after a round trip (-want +got):\n%s", diff)
	}
}

// TestReadBundleRefuses checks that ReadBundle refuses a bundle of another
// format and one whose trials name what the bundle does not hold, saying
// which trial.
func TestReadBundleRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(b map[string]any, series []any)
		// want are parts of the error.
		want []string
	}{
		{"older format", func(b map[string]any, _ []any) { b["format"] = shard.BundleFormat - 1 },
			[]string{fmt.Sprintf("format %d", shard.BundleFormat-1), fmt.Sprintf("reads format %d", shard.BundleFormat), "the coordinator's MST"}},
		{"newer format", func(b map[string]any, _ []any) { b["format"] = shard.BundleFormat + 1 },
			[]string{fmt.Sprintf("format %d", shard.BundleFormat+1), fmt.Sprintf("reads format %d", shard.BundleFormat)}},
		{"no format", func(b map[string]any, _ []any) { delete(b, "format") },
			[]string{"format 0"}},
		{"unknown work", func(b map[string]any, _ []any) { b["work"] = "judge" },
			[]string{`work is "judge"`, `"collect"`, `"grade"`}},
		{"grade work in a collect bundle", func(b map[string]any, _ []any) { b["grade"] = map[string]any{"cases": []any{}} },
			[]string{"a collect bundle holds grade work"}},
		{"trials to run in a grade bundle", func(b map[string]any, _ []any) {
			b["work"] = "grade"
			b["grade"] = map[string]any{"cases": []any{}, "trials": []any{}}
		}, []string{"no trials to run"}},
		{"a trial to grade of an unknown case", func(b map[string]any, _ []any) {
			b["work"] = "grade"
			delete(b, "series")
			b["grade"] = map[string]any{"cases": []any{map[string]any{"id": "a"}}, "trials": []any{map[string]any{"case": "zz", "variant": "v", "trial": 1}}}
		}, []string{"names a case the bundle does not hold"}},
		{"missing setting", func(_ map[string]any, series []any) { series[2].(map[string]any)["setting"] = 3 },
			[]string{"trials 1 to 2 of slow/a", "setting 3 of 3"}},
		{"negative setting", func(_ map[string]any, series []any) { series[0].(map[string]any)["setting"] = -1 },
			[]string{"trial fast/a#1", "setting -1 of 3"}},
		{"setting of another variant", func(_ map[string]any, series []any) { series[2].(map[string]any)["setting"] = 0 },
			[]string{"trials 1 to 2 of slow/a", "setting 0 is of variant fast"}},
		{"case not in the bundle", func(_ map[string]any, series []any) { series[1].(map[string]any)["case"] = "c" },
			[]string{"trial fast/c#1", "a case the bundle does not hold"}},
		{"an empty series", func(_ map[string]any, series []any) { series[1].(map[string]any)["count"] = 0 },
			[]string{"one trial or more"}},
		{"a series from trial 0", func(_ map[string]any, series []any) { series[2].(map[string]any)["first"] = 0 },
			[]string{"trials 0 to 1 of slow/a", "numbered from 1"}},
		{"a series too long", func(_ map[string]any, series []any) { series[2].(map[string]any)["count"] = 1 << 40 },
			[]string{"slow/a", "one trial or more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := shard.WriteBundle(dir, planBundle()); err != nil {
				t.Fatal(err)
			}
			path := bundleFile(t, dir)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var b map[string]any
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatal(err)
			}
			tt.change(b, b["series"].([]any))
			raw, err = json.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := shard.ReadBundle(dir)
			if err == nil {
				t.Fatalf("ReadBundle(a bundle with %s) = %d trials, want an error", tt.name, got.Size())
			}
			if got != nil {
				t.Errorf("ReadBundle(a bundle with %s) returned a bundle with its error, want nil", tt.name)
			}
			for _, w := range append(tt.want, dir) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ReadBundle(a bundle with %s) = %q, want it to say %q", tt.name, err, w)
				}
			}
		})
	}
}

// TestReadBundleMissing checks that a folder without a bundle is an error.
func TestReadBundleMissing(t *testing.T) {
	t.Parallel()
	if b, err := shard.ReadBundle(t.TempDir()); err == nil {
		t.Errorf("ReadBundle(an empty folder) = %+v, want an error", b)
	}
}

// bundleFile returns the one file WriteBundle wrote into dir.
func bundleFile(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].IsDir() {
		t.Fatalf("WriteBundle wrote %v into its folder, want one file", entries)
	}
	return filepath.Join(dir, entries[0].Name())
}
