package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Run checks that the stores newStore makes behave as store.Store and
// store.Run say.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateOpen", testCreateOpen},
		{"BadIDs", testBadIDs},
		{"RunRecord", testRunRecord},
		{"RunRecordConcurrent", testRunRecordConcurrent},
		{"Config", testConfig},
		{"Cases", testCases},
		{"Graders", testGraders},
		{"Transcripts", testTranscripts},
		{"TranscriptsStop", testTranscriptsStop},
		{"TranscriptNoOverwrite", testTranscriptNoOverwrite},
		{"TranscriptOneWriterWins", testTranscriptOneWriterWins},
		{"ReplaceTranscript", testReplaceTranscript},
		{"EscapedKeys", testEscapedKeys},
		{"Redaction", testRedaction},
		{"Grades", testGrades},
		{"GradesStop", testGradesStop},
		{"GradesConcurrent", testGradesConcurrent},
		{"GradesLarge", testGradesLarge},
		{"GradeSets", testGradeSets},
		{"Cancelled", testCancelled},
		{"Lock", testLock},
		{"LockConcurrent", testLockConcurrent},
		{"DetachedRecords", testDetached},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// opts compares what a store read back with what was written: empty and
// nil slices and maps are alike, and raw JSON is compared as the value it
// encodes (a store may reformat it).
var opts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 }, cmp.Transformer("jsonValue", func(m json.RawMessage) any {
		if len(m) == 0 {
			return nil
		}
		d := json.NewDecoder(strings.NewReader(string(m)))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return "invalid JSON: " + string(m)
		}
		return v
	})),
}

// create makes the run id in s and stores a run record in it.
func create(t *testing.T, s store.Store, id string, redact *secrets.Redactor) store.Run {
	t.Helper()
	r, err := s.Create(t.Context(), id, redact)
	if err != nil {
		t.Fatalf("Create(%q) = %v", id, err)
	}
	if err := r.WriteRun(t.Context(), runRecord(id, 1)); err != nil {
		t.Fatalf("WriteRun of new run %q = %v", id, err)
	}
	return r
}

var (
	started = time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.UTC)
	ended   = started.Add(90 * time.Second)
)

// runRecord is a run record with every field set; n tells records apart.
func runRecord(id string, n int) transcript.Run {
	return transcript.Run{
		Kind: "mst.run", Version: transcript.RunVersion, ID: id, Eval: "weather",
		ConfigFile: "eval.yaml", ConfigHash: "sha256:" + strings.Repeat("ab", 32), MSTVersion: "v0.9.0",
		Started: started, Ended: ended,
		Runner: transcript.RunnerInfo{
			Name: "docker", Options: map[string]string{"image": "mst:latest"}, Shards: 2, Keep: "failed",
			Machines: []transcript.Machine{{
				Shard: 1, ID: "m-1", Image: "mst:latest", MSTVersion: "v0.9.0",
				ClientVersions: map[string]string{"claude-code": "2.1.0"}, OS: "linux",
				Trials: 3, Ended: "done", CleanupOK: true, Attempt: 1,
			}},
		},
		Selection: transcript.Selection{Variants: []string{"terse"}, Cases: []string{"c1", "c2"}, Trials: 2, Limit: 5},
		Variants:  []string{"terse", "chatty"}, Cases: 3, Trials: 2,
		Counts:  transcript.Counts{Planned: 6, Answered: 3, NoAnswer: 1, TimedOut: 1, Errored: 1},
		Collect: transcript.CollectComplete, Resumes: n, Note: fmt.Sprintf("record %d", n),
	}
}

// sampleTranscript is a transcript of k with every field set.
func sampleTranscript(k transcript.Key, answer string) *transcript.Transcript {
	return &transcript.Transcript{
		Kind: "mst.transcript", Version: transcript.Version, Run: "run-1", Key: k, Shard: 1,
		Client: transcript.ClientInfo{Name: "api", Version: "1.0.0"}, Model: "offline",
		Servers: []transcript.ServerInfo{{
			Name: "weather", Transport: "stdio", Tools: []string{"get_forecast"},
			ToolsHash: "sha256:" + strings.Repeat("0f", 32), Implementation: "weather 1.2",
		}},
		Prompt: "What is the weather in Oslo?",
		Messages: []transcript.Message{
			{Role: "user", Text: "What is the weather in Oslo?"},
			{Role: "assistant", ToolCalls: []string{"call-1"}},
			{Role: "tool", ToolCall: "call-1", Text: "sunny, 4°C"},
			{Role: "assistant", Text: answer},
		},
		ToolCalls: []transcript.ToolCall{{
			ID: "call-1", Server: "weather", Tool: "get_forecast",
			Arguments: json.RawMessage(`{"city": "Oslo", "days": 2}`), Result: "sunny, 4°C",
			Started: started.Add(time.Second), DurationMs: 12.5,
		}},
		Answer:      answer,
		Usage:       transcript.Usage{InputTokens: 120, OutputTokens: 30, CachedTokens: 10, CostUSD: 0.0012, ModelCalls: 2},
		Timing:      transcript.Timing{Started: started, Ended: ended, DurationMs: 1500.25, SetupMs: 40},
		Outcome:     transcript.Outcome{Status: transcript.Answered},
		Environment: transcript.Environment{Runner: "local", OS: "linux", Arch: "amd64"},
		ClientTelemetry: map[string]any{
			"stopReason": "end_turn", "streamed": true, "tools": []any{"get_forecast"},
		},
	}
}

// sampleGrade is a grade of k with every field set.
func sampleGrade(k transcript.Key, passed bool, detail string) transcript.TrialGrade {
	return transcript.TrialGrade{
		Key: k, Graded: true, Passed: passed,
		Results: []transcript.Result{
			{Grader: `toolCalled get_forecast{city:"Oslo"}`, Passed: true},
			{Grader: `answerContains "sunny"`, Passed: passed, Detail: detail},
		},
		Trial: transcript.Summary{
			Status: transcript.Answered, Client: "api", Model: "offline", InputTokens: 120,
			OutputTokens: 30, DurationMs: 1500.25, ToolCalls: 1, Ended: ended,
		},
	}
}

func compareKeys(a, b transcript.Key) int {
	if c := strings.Compare(a.Variant, b.Variant); c != 0 {
		return c
	}
	if c := strings.Compare(a.Case, b.Case); c != 0 {
		return c
	}
	return a.Trial - b.Trial
}

// keys returns r's keys, sorted, failing t when one is listed twice.
func keys(t *testing.T, r store.Run) []transcript.Key {
	t.Helper()
	ks, err := r.Keys(t.Context())
	if err != nil {
		t.Fatalf("Keys = %v", err)
	}
	slices.SortFunc(ks, compareKeys)
	for i := 1; i < len(ks); i++ {
		if ks[i] == ks[i-1] {
			t.Errorf("Keys lists %v twice", ks[i])
		}
	}
	return ks
}

// allTranscripts returns r's transcripts by key, failing t when one is
// visited twice.
func allTranscripts(t *testing.T, r store.Run) map[transcript.Key]*transcript.Transcript {
	t.Helper()
	got := map[transcript.Key]*transcript.Transcript{}
	err := r.Transcripts(t.Context(), func(tr *transcript.Transcript) error {
		if _, ok := got[tr.Key]; ok {
			t.Errorf("Transcripts visited %v twice", tr.Key)
		}
		got[tr.Key] = tr
		return nil
	})
	if err != nil {
		t.Fatalf("Transcripts = %v", err)
	}
	return got
}

// allGrades returns r's grades by key, failing t when fn is called twice
// for one key.
func allGrades(t *testing.T, r store.Run) map[transcript.Key]transcript.TrialGrade {
	t.Helper()
	got := map[transcript.Key]transcript.TrialGrade{}
	err := r.Grades(t.Context(), func(g transcript.TrialGrade) error {
		if _, ok := got[g.Key]; ok {
			t.Errorf("Grades called fn twice for %v", g.Key)
		}
		got[g.Key] = g
		return nil
	})
	if err != nil {
		t.Fatalf("Grades = %v", err)
	}
	return got
}
