package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// writeFiles creates files (path → content) under dir, with their folders.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const fullYAML = `# A config that uses every field.
name: quickstart
description: Does the model use the weather server?
datasets:
  - cases.jsonl
  - path: more/cases.yaml
servers:
  weather:
    command: ./bin/weather
    args: [--units, metric]
    env: {UNITS: metric}
    cwd: data
    startupTimeout: 45s
  remote:
    url: http://127.0.0.1:8080/mcp
    headers: {Authorization: Bearer x}
  npx:
    command: npx
variants:
  terse:
    description: Short tool descriptions.
    model: offline
    servers: [weather]
    clientOptions: {timeout: 60s, maxActions: 8}
    tools:
      weather:
        get_forecast: {description: "Forecast <short>.", hidden: false}
        get_alerts: {hidden: true}
  clear:
    client: codex-cli
    model: openai/gpt-5
  base:
    model: anthropic/claude-sonnet-4-5
trials: 3
graders:
  - answerContains: sunny
  - toolCalled: get_forecast
limits: {concurrency: 2, providers: {anthropic: 2, offline: 8}, servers: {weather: 4}}
results: ./out
`

const fullJSON = `{
  "$schema": "./eval.schema.json",
  "name": "quickstart",
  "description": "Does the model use the weather server?",
  "datasets": ["cases.jsonl", {"path": "more/cases.yaml"}],
  "servers": {
    "weather": {"command": "./bin/weather", "args": ["--units", "metric"], "env": {"UNITS": "metric"}, "cwd": "data", "startupTimeout": "45s"},
    "remote": {"url": "http://127.0.0.1:8080/mcp", "headers": {"Authorization": "Bearer x"}},
    "npx": {"command": "npx"}
  },
  "variants": {
    "terse": {
      "description": "Short tool descriptions.",
      "model": "offline",
      "servers": ["weather"],
      "clientOptions": {"timeout": "60s", "maxActions": 8},
      "tools": {"weather": {"get_forecast": {"description": "Forecast <short>.", "hidden": false}, "get_alerts": {"hidden": true}}}
    },
    "clear": {"client": "codex-cli", "model": "openai/gpt-5"},
    "base": {"model": "anthropic/claude-sonnet-4-5"}
  },
  "trials": 3,
  "graders": [{"answerContains": "sunny"}, {"toolCalled": "get_forecast"}],
  "limits": {"concurrency": 2, "providers": {"anthropic": 2, "offline": 8}, "servers": {"weather": 4}},
  "results": "./out"
}
`

func wantFull(dir string) *Config {
	desc := "Forecast <short>."
	all := []string{"npx", "remote", "weather"}
	return &Config{
		Name:        "quickstart",
		Description: "Does the model use the weather server?",
		Datasets: []Dataset{
			{Path: filepath.Join(dir, "cases.jsonl")},
			{Path: filepath.Join(dir, "more", "cases.yaml")},
		},
		Servers: map[string]ServerConfig{
			"weather": {
				Command:        filepath.Join(dir, "bin", "weather"),
				Args:           []string{"--units", "metric"},
				Env:            map[string]string{"UNITS": "metric"},
				Cwd:            filepath.Join(dir, "data"),
				StartupTimeout: Duration(45 * time.Second),
			},
			"remote": {URL: "http://127.0.0.1:8080/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
			"npx":    {Command: "npx"},
		},
		Variants: map[string]Variant{
			"terse": {
				Description:   "Short tool descriptions.",
				Client:        "api",
				Model:         "offline",
				Servers:       []string{"weather"},
				ClientOptions: json.RawMessage(`{"maxActions":8,"timeout":"60s"}`),
				Tools: map[string]map[string]ToolOverride{
					"weather": {"get_forecast": {Description: &desc}, "get_alerts": {Hidden: true}},
				},
			},
			"clear": {Client: "codex-cli", Model: "openai/gpt-5", Servers: all},
			"base":  {Client: "api", Model: "anthropic/claude-sonnet-4-5", Servers: all},
		},
		VariantOrder: []string{"terse", "clear", "base"},
		Trials:       3,
		Graders: []json.RawMessage{
			json.RawMessage(`{"answerContains":"sunny"}`),
			json.RawMessage(`{"toolCalled":"get_forecast"}`),
		},
		Limits: Limits{
			Concurrency: 2,
			Providers:   map[string]int{"anthropic": 2, "offline": 8},
			Servers:     map[string]int{"weather": 4},
		},
		Results: "./out",
		Dir:     dir,
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file, content string
	}{
		{"eval.yaml", fullYAML},
		{"eval.yml", fullYAML},
		{"eval.json", fullJSON},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				tt.file:           tt.content,
				"cases.jsonl":     "{}\n",
				"more/cases.yaml": "[]\n",
			})
			path := filepath.Join(dir, tt.file)
			got, err := Load(path, fakeCatalog{})
			if err != nil {
				t.Fatalf("Load(%s) failed:\n%v", tt.file, err)
			}
			want := wantFull(dir)
			want.File = path
			sum := sha256.Sum256([]byte(tt.content))
			want.Hash = hex.EncodeToString(sum[:])
			if diff := cmp.Diff(want, got, cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("Load(%s) mismatch (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"eval.yaml": `name: min
datasets: [/dev/null]
servers:
  b: {url: "https://example.com/mcp"}
  a: {command: node, args: [server.js]}
variants:
  zeta: {model: offline}
  alpha: {model: offline, client: api}
  mid: {model: offline, servers: [b]}
`,
	})
	got, err := Load(filepath.Join(dir, "eval.yaml"), fakeCatalog{})
	if err != nil {
		t.Fatalf("Load failed:\n%v", err)
	}
	want := &Config{
		Name:     "min",
		Datasets: []Dataset{{Path: "/dev/null"}},
		Servers: map[string]ServerConfig{
			"a": {Command: "node", Args: []string{"server.js"}},
			"b": {URL: "https://example.com/mcp"},
		},
		Variants: map[string]Variant{
			"zeta":  {Client: "api", Model: "offline", Servers: []string{"a", "b"}},
			"alpha": {Client: "api", Model: "offline", Servers: []string{"a", "b"}},
			"mid":   {Client: "api", Model: "offline", Servers: []string{"b"}},
		},
		VariantOrder: []string{"zeta", "alpha", "mid"},
		Trials:       1,
		Limits:       Limits{Concurrency: 4},
		Results:      DefaultResults,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Config{}, "File", "Dir", "Hash")); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadYAMLFeatures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Anchors and merge keys let variants share settings; block scalars
	// hold long descriptions.
	writeFiles(t, dir, map[string]string{
		"eval.yaml": `name: anchors
datasets: [/dev/null]
servers:
  w: {command: node}
variants:
  base: &base
    model: offline
    clientOptions: {maxActions: 3}
  real:
    <<: *base
    model: anthropic/claude-sonnet-4-5
    tools:
      w:
        t:
          description: |
            Line one.
            Line two.
`,
	})
	got, err := Load(filepath.Join(dir, "eval.yaml"), fakeCatalog{})
	if err != nil {
		t.Fatalf("Load failed:\n%v", err)
	}
	real := got.Variants["real"]
	if real.Model != "anthropic/claude-sonnet-4-5" || string(real.ClientOptions) != `{"maxActions":3}` {
		t.Errorf("Load: variant real = %+v, want the merged base with its own model", real)
	}
	if d := real.Tools["w"]["t"].Description; d == nil || *d != "Line one.\nLine two.\n" {
		t.Errorf("Load: tool description = %v, want the block scalar", d)
	}
	if diff := cmp.Diff([]string{"base", "real"}, got.VariantOrder); diff != "" {
		t.Errorf("VariantOrder mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadReturnsErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "eval.yaml"), fakeCatalog{})
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("Load(missing file) = %v, want one Errors entry", err)
	}
}

func TestLoadWholeNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct{ file, content string }{
		{"eval.json", `{"name": "n", "datasets": ["/dev/null"], "servers": {"s": {"command": "node"}}, "variants": {"v": {"model": "offline"}}, "trials": 3.0, "limits": {"concurrency": 2e0}}`},
		{"eval.yaml", "name: n\ndatasets: [/dev/null]\nservers: {s: {command: node}}\nvariants: {v: {model: offline}}\ntrials: 3.0\nlimits: {concurrency: 2.0}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{tt.file: tt.content})
			got, err := Load(filepath.Join(dir, tt.file), fakeCatalog{})
			if err != nil {
				t.Fatalf("Load(%s) failed:\n%v", tt.file, err)
			}
			if got.Trials != 3 || got.Limits.Concurrency != 2 {
				t.Errorf("Load(%s): trials %d, concurrency %d, want 3 and 2", tt.file, got.Trials, got.Limits.Concurrency)
			}
		})
	}
}
