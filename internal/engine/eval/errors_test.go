package eval

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// loadErrors loads content written as file in a fresh folder (next to a
// cases.jsonl and a folder named data) and returns the problems as lines,
// with the folder left out of the file names.
func loadErrors(t *testing.T, file, content string) []string {
	t.Helper()
	return loadErrorsWith(t, fakeCatalog{}, file, content)
}

func loadErrorsWith(t *testing.T, cat Catalog, file, content string) []string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{file: content, "cases.jsonl": "{}\n", "data/x": ""})
	cfg, err := Load(filepath.Join(dir, file), cat)
	if err == nil {
		t.Fatalf("Load(%s) = %+v, want errors", file, cfg)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Load(%s) error is %T, want Errors", file, err)
	}
	var lines []string
	for _, e := range es {
		e.File = filepath.Base(e.File)
		lines = append(lines, strings.ReplaceAll(e.Error(), dir+string(filepath.Separator), ""))
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(es) {
		t.Errorf("Errors.Error() has %d lines, want %d", got, len(es))
	}
	return lines
}

// head is a valid start that the cases below add to.
const head = `name: t
datasets: [cases.jsonl]
servers:
  weather: {command: node}
`

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{
			name:    "unknown top-level key",
			content: head + "variants: {v: {model: offline}}\ntrails: 3\n",
			want:    []string{"eval.yaml:6:1: trails: unknown key (did you mean trials?)"},
		},
		{
			name:    "unknown key far from any",
			content: head + "variants: {v: {model: offline}}\nzzz: 1\n",
			want:    []string{"eval.yaml:6:1: zzz: unknown key (known: datasets, description, graders, limits, name, plugins, results, servers, trials, variants)"},
		},
		{
			name:    "type error",
			content: head + "variants: {v: {model: offline}}\ntrials: three\n",
			want:    []string{`eval.yaml:6:1: trials: must be an integer, got string "three"`},
		},
		{
			name:    "null value",
			content: head + "variants: {v: {model: offline}}\ntrials:\n",
			want:    []string{`eval.yaml:6:1: trials: must be an integer, got an empty value (null)`},
		},
		{
			name:    "range",
			content: head + "variants: {v: {model: offline}}\ntrials: 1001\nlimits: {concurrency: 0}\n",
			want: []string{
				"eval.yaml:7:10: limits.concurrency: must be at least 1, got number 0",
				"eval.yaml:6:1: trials: must be at most 1000, got number 1001",
			},
		},
		{
			name:    "missing required keys",
			content: "description: nothing else\n",
			want: []string{
				"eval.yaml: datasets: missing required key",
				"eval.yaml: name: missing required key",
				"eval.yaml: servers: missing required key",
				"eval.yaml: variants: missing required key",
			},
		},
		{
			name:    "empty lists and maps",
			content: "name: t\ndatasets: []\nservers: {}\nvariants: {}\n",
			want: []string{
				"eval.yaml:2:1: datasets: must not be empty: list at least one",
				"eval.yaml:3:1: servers: must not be empty: declare at least one",
				"eval.yaml:4:1: variants: must not be empty: declare at least one",
			},
		},
		{
			name:    "name pattern",
			content: strings.Replace(head, "name: t", "name: Quick Start", 1) + "variants: {v: {model: offline}}\n",
			want: []string{
				`eval.yaml:1:1: name: must start with a lowercase letter or a digit and hold only lowercase letters, digits, '.', '_' and '-' (such as "weather-tools"), got string "Quick Start"`,
			},
		},
		{
			name: "datasets",
			content: `name: t
datasets:
  - cases.jsonl
  - 5
  - {path: missing.csv}
  - {file: x.csv}
  - ./cases.jsonl
  - data
servers: {weather: {command: node}}
variants: {v: {model: offline}}
`,
			want: []string{
				"eval.yaml:4:5: datasets[1]: must be a string or an object, got number 5",
				"eval.yaml:5:5: datasets[2]: no such file missing.csv (looked for missing.csv)",
				"eval.yaml:6:6: datasets[3].file: unknown key (known: options, path, source)",
				"eval.yaml:6:5: datasets[3].path: missing required key",
				"eval.yaml:7:5: datasets[4]: ./cases.jsonl is listed twice (also datasets[0])",
				"eval.yaml:8:5: datasets[5]: data is a folder; give a case file (.jsonl, .json, .yaml, .yml or .csv)",
			},
		},
		{
			name: "servers",
			content: `name: t
datasets: [cases.jsonl]
servers:
  both: {command: node, url: "http://x/mcp"}
  none: {args: [a]}
  ftp: {url: "ftp://host/mcp"}
  http: {url: "http://host/mcp", args: [a], env: {A: b}, cwd: ., headers: {A: b}}
  stdio: {command: node, headers: {A: b}, comand: x}
  slow: {command: node, startupTimeout: 30, env: {PORT: 8080}}
  late: {command: node, startupTimeout: soon}
  "bad name": {command: node}
variants: {v: {model: offline}}
`,
			want: []string{
				`eval.yaml:11:3: servers["bad name"]: invalid name: a server name may hold only letters, digits, '_' and '-'`,
				"eval.yaml:4:3: servers.both: set either command (a stdio server) or url (an HTTP server), not both",
				`eval.yaml:6:9: servers.ftp.url: must be an http:// or https:// URL, got "ftp://host/mcp"`,
				"eval.yaml:7:34: servers.http.args: only a stdio server (one with command) takes args",
				"eval.yaml:7:58: servers.http.cwd: only a stdio server (one with command) takes cwd",
				"eval.yaml:7:45: servers.http.env: only a stdio server (one with command) takes env",
				`eval.yaml:10:25: servers.late.startupTimeout: must be a duration such as 30s or 2m, got "soon"`,
				"eval.yaml:5:3: servers.none: missing command or url: a stdio server needs command, an HTTP server needs url",
				"eval.yaml:9:51: servers.slow.env.PORT: must be a string, got number 8080",
				"eval.yaml:9:25: servers.slow.startupTimeout: must be a duration with its unit, such as 30s or 2m, got the bare number 30 (write 30s for seconds)",
				"eval.yaml:8:43: servers.stdio.comand: unknown key (did you mean command?)",
				"eval.yaml:8:26: servers.stdio.headers: only an HTTP server (one with url) takes headers",
			},
		},
		{
			name: "variants",
			content: head + `  remote: {url: "http://x/mcp"}
variants:
  nomodel: {}
  badmodel: {model: gemini/pro}
  refs:
    model: offline
    servers: [weather, wether, weather, 7]
    tools:
      remote: {t: {hidden: true}}
      nope: {}
      weather: {t: {hidden: "yes", descripton: x}}
  none: {model: offline, servers: []}
  "bad/name": {model: offline}
  unknown: {model: offline, client: claude-cod}
`,
			want: []string{
				`eval.yaml:17:3: variants["bad/name"]: invalid name: a variant name may hold only letters, digits, '.', '_' and '-'`,
				`eval.yaml:8:14: variants.badmodel.model: must be "offline" or "<provider>/<model>" with provider anthropic, openai or google (such as "anthropic/claude-sonnet-4-5"), got string "gemini/pro"`,
				"eval.yaml:7:3: variants.nomodel.model: missing required key",
				"eval.yaml:16:26: variants.none.servers: must name at least one server; leave servers out to use all of them",
				`eval.yaml:11:24: variants.refs.servers[1]: unknown server "wether" (did you mean weather?)`,
				`eval.yaml:11:32: variants.refs.servers[2]: server "weather" is listed twice`,
				"eval.yaml:11:41: variants.refs.servers[3]: must be a string, got number 7",
				`eval.yaml:14:7: variants.refs.tools.nope: unknown server "nope" (known: remote, weather)`,
				`eval.yaml:13:7: variants.refs.tools.remote: server "remote" is not used by this variant (its servers: weather)`,
				"eval.yaml:15:36: variants.refs.tools.weather.t.descripton: unknown key (did you mean description?)",
				`eval.yaml:15:21: variants.refs.tools.weather.t.hidden: must be true or false, got string "yes"`,
				`eval.yaml:18:29: variants.unknown.client: unknown client "claude-cod" (known: api, bare, chatgpt, codex-app, codex-cli, cowork, rich)`,
			},
		},
		{
			name: "client options",
			content: head + `variants:
  terse:
    model: offline
    clientOptions: {timeot: 60s, maxActions: "8", max: 1}
  desk:
    client: cowork
    model: offline
    clientOptions: {reasoningEffort: hgih}
  bare:
    client: bare
    model: offline
    clientOptions: {timeout: 5s}
  wrong:
    model: offline
    clientOptions: [timeout]
`,
			want: []string{
				"eval.yaml:16:21: variants.bare.clientOptions.timeout: unknown option",
				"eval.yaml:12:5: variants.desk.clientOptions.appVersion: missing required option",
				`eval.yaml:12:21: variants.desk.clientOptions.reasoningEffort: must be one of "low", "medium", "high", got "hgih" (did you mean high?)`,
				"eval.yaml:8:51: variants.terse.clientOptions.max: unknown option (did you mean maxActions?)",
				`eval.yaml:8:34: variants.terse.clientOptions.maxActions: must be an integer, got string "8"`,
				"eval.yaml:8:21: variants.terse.clientOptions.timeot: unknown option (did you mean timeout?)",
				"eval.yaml:19:5: variants.wrong.clientOptions: must be an object, got a list",
			},
		},
		{
			name: "old names",
			content: head + `runner: docker
env: {shards: 2}
environment: local
variants:
  old:
    client: mst
    model: offline
    clientOptions: {computerUseProvider: linux-desktop, computerUseMaxActions: 5, nativeMaxActions: 5}
  cli:
    client: codex
    model: openai/gpt-5
    runner: docker
  app:
    client: chatgpt
    model: openai/gpt-5
    clientOptions: {surface: codex}
  chat:
    client: chatgpt
    model: openai/gpt-5
    clientOptions: {surface: chatgpt}
`,
			want: []string{
				"eval.yaml:6:1: env: the runner is not part of the eval: pass --runner on mst run",
				"eval.yaml:7:1: environment: the runner is not part of the eval: pass --runner on mst run",
				"eval.yaml:5:1: runner: the runner is not part of the eval: pass --runner on mst run",
				`eval.yaml:18:5: variants.app.client: client "chatgpt" with surface "codex" was renamed: use codex-app and delete clientOptions.surface`,
				"eval.yaml:24:21: variants.chat.clientOptions.surface: removed: chatgpt is always the ChatGPT app (the Codex surface is the codex-app client); delete this option",
				`eval.yaml:14:5: variants.cli.client: client "codex" was renamed: use codex-cli`,
				"eval.yaml:16:5: variants.cli.runner: the runner is not part of the eval: pass --runner on mst run",
				`eval.yaml:10:5: variants.old.client: client "mst" was renamed: use api`,
				"eval.yaml:12:57: variants.old.clientOptions.computerUseMaxActions: renamed: use maxActions",
				"eval.yaml:12:21: variants.old.clientOptions.computerUseProvider: removed: the client and the OS decide how it runs; delete this option",
				"eval.yaml:12:83: variants.old.clientOptions.nativeMaxActions: renamed: use maxActions",
			},
		},
		{
			name: "graders",
			content: head + `variants: {v: {model: offline}}
graders:
  - answerContains: sunny
  - answerContain: sunny
  - toolCalled: ""
  - [x]
`,
			want: []string{
				`eval.yaml:8:5: graders[1]: unknown grader "answerContain"`,
				"eval.yaml:9:5: graders[2]: toolCalled: must be a non-empty string",
				"eval.yaml:10:5: graders[3]: a grader must be an object with one key",
			},
		},
		{
			name: "limits",
			content: head + `variants: {v: {model: offline}}
limits:
  providers: {antropic: 2, openai: 0}
  servers: {wether: 1, weather: x}
  concurency: 3
`,
			want: []string{
				"eval.yaml:9:3: limits.concurency: unknown key (did you mean concurrency?)",
				"eval.yaml:7:15: limits.providers.antropic: unknown provider (did you mean anthropic?)",
				"eval.yaml:7:28: limits.providers.openai: must be at least 1, got number 0",
				`eval.yaml:8:24: limits.servers.weather: must be an integer, got string "x"`,
				`eval.yaml:8:13: limits.servers.wether: unknown server "wether" (did you mean weather?)`,
			},
		},
		{
			name: "schema keywords",
			content: head + `variants:
  v:
    client: rich
    model: offline
    clientOptions:
      mode: slow
      label: abcd
      ratio: 1
      step: 10.25
      tags: [a, a, b, c]
      old: 1
      not: x
      pair: {a: 1}
      either: x
      both: 1
      shape: {z: 1}
`,
			want: []string{
				`eval.yaml:19:7: variants.v.clientOptions.both: matches more than one of the allowed forms`,
				`eval.yaml:18:7: variants.v.clientOptions.either: must be an integer or true or false, got string "x"`,
				`eval.yaml:11:7: variants.v.clientOptions.label: must be at most 3 characters long (it has 4)`,
				`eval.yaml:10:7: variants.v.clientOptions.mode: must be "fast", got string "slow"`,
				`eval.yaml:16:7: variants.v.clientOptions.not: is not allowed here, got string "x"`,
				`eval.yaml:15:7: variants.v.clientOptions.old: is not allowed`,
				`eval.yaml:17:7: variants.v.clientOptions.pair: a needs b too`,
				`eval.yaml:17:7: variants.v.clientOptions.pair: must have at least 2 entries (it has 1)`,
				`eval.yaml:12:7: variants.v.clientOptions.ratio: must be less than 1, got number 1`,
				`eval.yaml:20:7: variants.v.clientOptions.shape: does not match any of the allowed forms (` + "`mst schema`" + ` prints them)`,
				`eval.yaml:13:7: variants.v.clientOptions.step: must be a multiple of 0.5, got number 10.25`,
				`eval.yaml:13:7: variants.v.clientOptions.step: must be at most 10, got number 10.25`,
				`eval.yaml:14:7: variants.v.clientOptions.tags: items 0 and 1 are the same; give each once`,
				`eval.yaml:14:7: variants.v.clientOptions.tags: must list at most 3 items (it has 4)`,
			},
		},
		{
			name:    "results",
			content: head + "variants: {v: {model: offline}}\nresults: \"\"\n",
			want:    []string{"eval.yaml:6:1: results: must not be empty"},
		},
		{
			name:    "variant names with dots are quoted in paths",
			content: head + "variants:\n  v1.2: {model: offline, servers: [wether]}\n",
			want:    []string{`eval.yaml:6:36: variants["v1.2"].servers[0]: unknown server "wether" (did you mean weather?)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := loadErrors(t, "eval.yaml", tt.content)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load(%s) errors mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, content string
		want                []string
	}{
		{"unsupported extension", "eval.toml", "name = 1\n", []string{`eval.toml: unsupported config format ".toml": name the file .yaml, .yml or .json`}},
		{"empty YAML", "eval.yaml", "# nothing yet\n", []string{"eval.yaml: the file is empty"}},
		{"empty JSON", "eval.json", "  \n", []string{"eval.json: the file is empty"}},
		{"malformed YAML", "eval.yaml", "name: t\nservers: [a,\nvariants: {}\n", []string{"eval.yaml:2:10: a list opened with [ is not closed with ]"}},
		{"duplicate YAML key", "eval.yaml", "name: t\ntrials: 1\nname: u\n", []string{`eval.yaml:3:1: key "name" is given twice (first on line 1)`}},
		{"two YAML documents", "eval.yaml", "name: t\n---\nname: u\n", []string{"eval.yaml:3:1: the file holds 2 YAML documents; an eval config is a single document (remove the --- separators)"}},
		{"YAML list", "eval.yaml", "- name: t\n", []string{"eval.yaml: the config must be an object of keys (name, datasets, servers, variants, …), got a list"}},
		{"malformed JSON", "eval.json", "{\n  \"name\": \"t\",\n  \"trials\": 3,\n}\n", []string{"eval.json:4:1: a comma before } : JSON allows no comma after the last key; remove it"}},
		{"unclosed JSON", "eval.json", "{\n  \"name\": \"t\"\n", []string{"eval.json:3:1: unexpected end of file (a bracket or quote is not closed)"}},
		{"duplicate JSON key", "eval.json", "{\n  \"name\": \"t\",\n  \"name\": \"u\"\n}\n", []string{`eval.json:3:3: key "name" is given twice (first on line 2)`}},
		{"trailing JSON", "eval.json", "{\"name\": \"t\"} {}\n", []string{"eval.json:1:15: unexpected text after the end of the JSON value"}},
		{
			"JSON positions", "eval.json",
			"{\n  \"name\": \"t\",\n  \"datasets\": [\"cases.jsonl\"],\n  \"servers\": {\"w\": {\"command\": \"node\"}},\n  \"variants\": {\"v\": {\"model\": \"offline\", \"clientOptions\": {\"timeot\": \"1s\"}}},\n  \"trails\": 3\n}\n",
			[]string{
				"eval.json:6:3: trails: unknown key (did you mean trials?)",
				"eval.json:5:60: variants.v.clientOptions.timeot: unknown option (did you mean timeout?)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := loadErrors(t, tt.file, tt.content)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load(%s) errors mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path, want string
	}{
		{"no file", filepath.Join(dir, "eval.yaml"), filepath.Join(dir, "eval.yaml") + ": no such file (check the path; run mst validate FILE)"},
		{"folder", dir, dir + ": is a folder, not a config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tt.path, fakeCatalog{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("Load(%s) = %v, want %q", tt.path, err, tt.want)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "eval.yaml", Msg: "the file is empty"}, "eval.yaml: the file is empty"},
		{Error{File: "eval.yaml", Path: "trials", Msg: "m"}, "eval.yaml: trials: m"},
		{Error{File: "eval.yaml", Path: "trials", Line: 7, Msg: "m"}, "eval.yaml:7: trials: m"},
		{Error{File: "eval.yaml", Path: "trials", Line: 7, Col: 3, Msg: "m"}, "eval.yaml:7:3: trials: m"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
	es := Errors{{File: "a", Msg: "x"}, {File: "a", Path: "p", Msg: "y"}}
	if got, want := es.Error(), "a: x\na: p: y"; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}

func TestSortErrors(t *testing.T) {
	t.Parallel()
	in := Errors{
		{Path: "variants.v.servers[10]", Msg: "a"},
		{Path: "variants.v.servers[2]", Msg: "a"},
		{Path: "name", Msg: "b"},
		{Path: "name", Msg: "a"},
		{Path: "", Msg: "file"},
		{Path: "name", Msg: "a"},
	}
	want := Errors{
		{Path: "", Msg: "file"},
		{Path: "name", Msg: "a"},
		{Path: "name", Msg: "b"},
		{Path: "variants.v.servers[2]", Msg: "a"},
		{Path: "variants.v.servers[10]", Msg: "a"},
	}
	if diff := cmp.Diff(want, sortErrors(in)); diff != "" {
		t.Errorf("sortErrors mismatch (-want +got):\n%s", diff)
	}
}
