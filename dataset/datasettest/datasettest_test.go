package datasettest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/dataset/datasettest"
)

// lines is a source that keeps the contract: one case per line of a text
// file, id and input separated by a tab; broken ones are made from it.
func lines() *dataset.SourceDefinition {
	return &dataset.SourceDefinition{
		Name:        "test/dataset/lines",
		Description: "One case per line: ID<tab>INPUT.",
		Options:     json.RawMessage(`{"type":"object","additionalProperties":false,"required":["file"],"properties":{"file":{"type":"string"}}}`),
		Credentials: []string{"LINES_TOKEN"},
		Load: func(ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			var o struct {
				File string `json:"file"`
			}
			if err := json.Unmarshal(p.Options, &o); err != nil {
				return nil, fmt.Errorf("options: %w", err)
			}
			if tok, _ := p.Env("LINES_TOKEN"); tok != "secret" {
				return nil, errors.New("LINES_TOKEN is not set: set it in the secrets file")
			}
			data, err := os.ReadFile(filepath.Join(p.Dir, o.File))
			if err != nil {
				return nil, fmt.Errorf("options.file: %w", err)
			}
			var cases []dataset.Case
			for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				id, input, _ := strings.Cut(l, "\t")
				cases = append(cases, dataset.Case{ID: id, Input: input, Metadata: map[string]any{"line": i + 1}})
			}
			return cases, nil
		},
	}
}

func fixture(t *testing.T) datasettest.Fixture {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cases.txt"), []byte("oslo\tForecast for Oslo?\ntokyo\tForecast for Tokyo?\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return datasettest.Fixture{
		Options: json.RawMessage(`{"file":"cases.txt"}`),
		Dir:     dir,
		IDs:     []string{"oslo", "tokyo"},
		Env:     map[string]string{"LINES_TOKEN": "secret"},
		Bad:     []json.RawMessage{json.RawMessage(`{"file":"missing.txt"}`)},
	}
}

func TestConforming(t *testing.T) {
	t.Parallel()
	datasettest.Run(t, lines(), fixture(t))
}

// TestBroken shows that the suite catches each way a source can break the
// contract: Check must report a problem holding want.
func TestBroken(t *testing.T) {
	t.Parallel()
	// with returns lines() whose Load is changed by f.
	with := func(f func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error)) *dataset.SourceDefinition {
		d := lines()
		inner := d.Load
		d.Load = func(ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) { return f(inner, ctx, p) }
		return d
	}
	var calls atomic.Int64
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	tests := []struct {
		name string
		def  *dataset.SourceDefinition
		want string
	}{
		{"reversed", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			cs, err := load(ctx, p)
			if len(cs) == 2 {
				cs[0], cs[1] = cs[1], cs[0]
			}
			return cs, err
		}), `gave the ids ["tokyo" "oslo"], want ["oslo" "tokyo"]`},
		{"blank input", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			cs, err := load(ctx, p)
			if len(cs) > 0 {
				cs[0].Input = "  "
			}
			return cs, err
		}), "MST rejects the cases Load gives"},
		{"undeclared credential", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			p.Env("AWS_SECRET_ACCESS_KEY")
			return load(ctx, p)
		}), `Load asked Env for "AWS_SECRET_ACCESS_KEY", which is not in Credentials`},
		{"not deterministic", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			cs, err := load(ctx, p)
			if len(cs) > 0 {
				cs[0].Metadata["call"] = calls.Add(1)
			}
			return cs, err
		}), "loading twice gave different cases"},
		{"accepts bad options", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			return []dataset.Case{{ID: "oslo", Input: "x"}, {ID: "tokyo", Input: "y"}}, nil
		}), `Load({"file":"missing.txt"}) gave 2 cases and no error`},
		{"empty error", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			cs, err := load(ctx, p)
			if err != nil {
				return nil, errors.New(" ")
			}
			return cs, nil
		}), "returned an empty error"},
		{"panics", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			var m map[string]int
			//lint:ignore SA5000 the source panics on purpose, as a careless one would
			m["x"]++
			return nil, nil
		}), "Load panicked"},
		{"hangs when cancelled", with(func(load func(context.Context, dataset.SourceParams) ([]dataset.Case, error), ctx context.Context, p dataset.SourceParams) ([]dataset.Case, error) {
			if ctx.Err() != nil {
				<-hang // ignores ctx: the test's cleanup lets it go
			}
			return load(context.WithoutCancel(ctx), p)
		}), "Load with a cancelled context had not returned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tt.name == "hangs when cancelled" {
				// The suite waits on the deadline of the context it is
				// given: an event, here a short one.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			err := datasettest.Check(ctx, tt.def, fixture(t))
			if err == nil {
				t.Fatalf("Check(%s) = nil, want a problem holding %q", tt.name, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check(%s) =\n%v\nwant a problem holding %q", tt.name, err, tt.want)
			}
		})
	}
}

// TestLoadJSON runs the suite on a source that gives its cases as JSON
// objects, as program plugins do; one with an unknown key is caught.
func TestLoadJSON(t *testing.T) {
	t.Parallel()
	asJSON := func(extra string) *dataset.SourceDefinition {
		d := lines()
		load := d.Load
		d.Load = nil
		d.LoadJSON = func(ctx context.Context, p dataset.SourceParams) ([]json.RawMessage, error) {
			cases, err := load(ctx, p)
			if err != nil {
				return nil, err
			}
			var out []json.RawMessage
			for _, c := range cases {
				data, err := json.Marshal(c)
				if err != nil {
					return nil, err
				}
				if extra != "" {
					data = append(append(data[:len(data)-1], ","...), extra+"}"...)
				}
				out = append(out, data)
			}
			return out, nil
		}
		return d
	}
	datasettest.Run(t, asJSON(""), fixture(t))
	err := datasettest.Check(t.Context(), asJSON(`"inptu": "typo"`), fixture(t))
	if err == nil || !strings.Contains(err.Error(), "MST rejects the cases Load gives") || !strings.Contains(err.Error(), "inptu") {
		t.Errorf("Check(a case with the key inptu) = %v, want MST's rejection naming inptu", err)
	}
}
