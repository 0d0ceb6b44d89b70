package eval

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/ground/inputcheck/brokentest"
)

// brokenConfigYAML is a valid config with the shapes a config has: nested
// keys, a block list, flow lists and objects, quoted strings.
const brokenConfigYAML = `name: broken
datasets:
  - cases.jsonl
servers:
  weather:
    command: mcp-testserver
    args: ["--mode", 'plain']
    env: {LEVEL: "2"}
variants:
  terse:
    model: offline
    servers: [weather]
trials: 2
`

const brokenConfigJSON = `{"name": "broken", "datasets": ["cases.jsonl"], "servers": {"weather": {"command": "mcp-testserver", "args": ["--mode"]}}, "variants": {"terse": {"model": "offline"}}, "trials": 2}`

// TestBrokenConfigsSayWhere: for every broken config the generator makes
// from a valid one (YAML and JSON), Load fails with MST's own words, never
// the parser's, each problem with the file and a line, and never panics.
func TestBrokenConfigsSayWhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		files []brokentest.File
	}{
		{"eval.yaml", brokentest.YAML(brokenConfigYAML)},
		{"eval.json", brokentest.JSON(brokenConfigJSON)},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"cases.jsonl": "{}\n"})
		path := filepath.Join(dir, tc.file)
		n := 0
		for _, f := range tc.files {
			if err := os.WriteFile(path, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, fakeCatalog{})
			if err == nil {
				continue // some edits leave a valid config
			}
			n++
			var es Errors
			if !errors.As(err, &es) {
				t.Errorf("%s, %s: Load error is %T (%v), want Errors", tc.file, f.Name, err, err)
				continue
			}
			for _, e := range es {
				msg := e.Error()
				if raw := brokentest.Raw(msg); raw != "" {
					t.Errorf("%s, %s: %q shows the parser's words %q\n%s", tc.file, f.Name, msg, raw, f.Data)
				}
				// A problem of the whole file (a missing key) has a key
				// path and no line; every other has a line.
				if !strings.HasPrefix(msg, path+":") || (len(bytes.TrimSpace(f.Data)) > 0 && e.Line == 0 && e.Path == "") {
					t.Errorf("%s, %s: %q does not start with the file and a line or a key path", tc.file, f.Name, msg)
				}
			}
		}
		if n < len(tc.files)/2 {
			t.Errorf("%s: only %d of %d broken files failed to load; the generator breaks too little", tc.file, n, len(tc.files))
		}
	}
}
