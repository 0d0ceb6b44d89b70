package dataset

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mst-eval/mst/internal/ground/inputcheck/brokentest"
)

// Valid datasets with the shapes a dataset has, one per format.
const (
	brokenYAML = `- id: weather-1
  input: "What is the weather in Paris?"
  metadata: {tags: [easy, city]}
  expect:
    - answerContains: sunny
- id: weather-2
  input: 'Tomorrow?'
`
	brokenJSON  = `[{"id": "weather-1", "input": "What is the weather?", "metadata": {"tags": ["easy"]}}, {"id": "w2", "input": "Tomorrow?"}]`
	brokenJSONL = `{"id": "weather-1", "input": "What is the weather?", "metadata": {"tags": ["easy"]}}`
	brokenCSV   = "id,input,tag\nweather-1,\"What is the weather, today?\",easy\nweather-2,Tomorrow?,hard\n"
)

// TestBrokenDatasetsSayWhere: for every broken dataset the generator
// makes from a valid one (YAML, JSON, JSONL, CSV), Load fails with MST's
// own words, never the parser's, each problem with the file and, but for
// a problem of the whole file, a line; and it never panics.
func TestBrokenDatasetsSayWhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		files []brokentest.File
	}{
		{"cases.yaml", brokentest.YAML(brokenYAML)},
		{"cases.json", brokentest.JSON(brokenJSON)},
		{"cases.jsonl", brokentest.JSON(brokenJSONL)},
		{"cases.csv", brokentest.CSV(brokenCSV)},
	} {
		path := filepath.Join(t.TempDir(), tc.file)
		n := 0
		for _, f := range tc.files {
			if err := os.WriteFile(path, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				continue // some edits leave a valid dataset
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
				if !strings.HasPrefix(msg, path+":") {
					t.Errorf("%s, %s: %q does not start with the file", tc.file, f.Name, msg)
				}
				if e.Line == 0 && len(bytes.TrimSpace(f.Data)) > 0 && !wholeFile(e.Msg) {
					t.Errorf("%s, %s: %q gives no line", tc.file, f.Name, msg)
				}
			}
		}
		if n < len(tc.files)/3 {
			t.Errorf("%s: only %d of %d broken files failed to load; the generator breaks too little", tc.file, n, len(tc.files))
		}
	}
}

// wholeFile says whether a problem without a line is one of the whole file.
func wholeFile(msg string) bool {
	for _, w := range []string{"not a text file", "empty", "holds no case", "must be a list"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
