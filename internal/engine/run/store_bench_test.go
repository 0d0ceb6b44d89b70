package run_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore"
	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// storeBenchEval is 250 cases x 2 variants x 2 trials = 1,000 quick
// trials: the offline model calls the test server's echo tool once and
// answers.
const (
	storeBenchCases    = 250
	storeBenchTrials   = 1000
	storeBenchEvalName = "storebench"
)

// BenchmarkStoreShards runs 1,000 quick trials through 4 processes shards
// into a directory store and into a gs:// store on the GCS emulator
// (fake-gcs-server on loopback), and reports the wall time of one run
// into each and the ratio gs/dir:
//
//	go test ./run/ -run '^$' -bench StoreShards -benchtime 1x
//
// The workers write the transcripts to the bucket themselves when the
// processes runner passes them STORAGE_EMULATOR_HOST; otherwise the
// coordinator writes each one as it arrives. Either way the figure is the
// cost of the store to the whole run.
func BenchmarkStoreShards(b *testing.B) {
	path := writeStoreBenchEval(b)
	secs := map[string]float64{}
	for _, kind := range []string{"dir", "gs"} {
		b.Run(kind, func(b *testing.B) {
			var st store.Store
			switch kind {
			case "dir":
				st = store.Dir{Root: b.TempDir(), Eval: "weather"}
			case "gs":
				g := blobtest.StartGCS(b)
				bucket := g.NewBucket(b)
				blobtest.Setenv(b, g.Env())
				u, err := blobstore.Parse("gs://" + bucket + "/mst")
				if err != nil {
					b.Fatal(err)
				}
				bs, err := blobstore.Open(b.Context(), u, blobstore.Options{Eval: storeBenchEvalName})
				if err != nil {
					b.Fatalf("opening %s: %v", u, err)
				}
				st = bs
			}
			var wall time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p, err := run.NewPlan(b.Context(), request(path))
				if err != nil {
					b.Fatalf("NewPlan = %v", err)
				}
				o := options(st)
				o.Runner = runner.ProcessesDefinition()
				o.Chosen = run.RunnerChoice{Options: map[string]string{"dir": b.TempDir()}, Shards: 4, Keep: runner.KeepNever}
				start := time.Now()
				b.StartTimer()
				out, err := run.Execute(b.Context(), p, o)
				b.StopTimer()
				wall += time.Since(start)
				if err != nil {
					b.Fatalf("Execute into the %s store = %v", kind, err)
				}
				if c := out.Run.Counts; c.Answered != storeBenchTrials || out.Run.Collect != transcript.CollectComplete {
					b.Fatalf("the run into the %s store ended %s with %+v, want %d trials answered", kind, out.Run.Collect, c, storeBenchTrials)
				}
				keys, err := out.Store.Keys(b.Context())
				if err != nil || len(keys) != storeBenchTrials {
					b.Fatalf("the %s store holds %d transcripts (%v), want %d", kind, len(keys), err, storeBenchTrials)
				}
				b.StartTimer()
			}
			s := wall.Seconds() / float64(b.N)
			secs[kind] = s
			b.ReportMetric(s, "wall-s/run")
			line := fmt.Sprintf("%d trials, 4 processes shards, %s store: %.2f s per run", storeBenchTrials, kind, s)
			if d := secs["dir"]; kind == "gs" && d > 0 {
				b.ReportMetric(s/d, "gs/dir")
				line += fmt.Sprintf(" (gs/dir %.2f; the directory store took %.2f s)", s/d, d)
			}
			b.Logf("%s", line)
		})
	}
}

// writeStoreBenchEval writes the benchmark's eval into a new folder and
// returns its path.
func writeStoreBenchEval(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	var cases strings.Builder
	for i := 1; i <= storeBenchCases; i++ {
		fmt.Fprintf(&cases, `{"id": "c%03d", "input": "Please echo 'word%d' back to me", "expect": [{"answerContains": "word%d"}]}`+"\n", i, i, i)
	}
	files := map[string]string{
		"cases.jsonl": cases.String(),
		"eval.yaml": `name: ` + storeBenchEvalName + `
datasets: [cases.jsonl]
servers:
  test:
    command: ` + testServer + `
variants:
  plain: {model: offline}
  other: {model: offline}
trials: 2
limits: {concurrency: 4}
graders:
  - toolCalled: echo
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return filepath.Join(dir, "eval.yaml")
}
