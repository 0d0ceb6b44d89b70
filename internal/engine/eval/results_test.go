package eval

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestResultsForms: results is the store's location, written as a string
// or as results.store; both give Config.Results, and the long form takes
// nothing but store.
func TestResultsForms(t *testing.T) {
	t.Parallel()
	const variants = "variants: {v: {model: offline}}\n"
	for _, tc := range []struct{ yaml, want string }{
		{"", DefaultResults},
		{"results: ./out\n", "./out"},
		{"results: {store: ./out}\n", "./out"},
		{"results: {store: 's3://bucket/team?endpoint=http://127.0.0.1:9000'}\n", "s3://bucket/team?endpoint=http://127.0.0.1:9000"},
		{"results:\n  store: gs://bucket/mst\n", "gs://bucket/mst"},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"eval.yaml": head + variants + tc.yaml, "cases.jsonl": "{}\n"})
		cfg, err := Load(filepath.Join(dir, "eval.yaml"), fakeCatalog{})
		if err != nil {
			t.Errorf("Load with %q = %v", tc.yaml, err)
			continue
		}
		if cfg.Results != tc.want {
			t.Errorf("Load with %q: Results = %q, want %q", tc.yaml, cfg.Results, tc.want)
		}
	}
	for _, bad := range []string{"results: {}\n", "results: {store: ./out, bucket: x}\n", "results: {store: ''}\n", "results: 3\n", "results: {store: [a]}\n"} {
		lines := loadErrors(t, "eval.yaml", head+variants+bad)
		if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "results") {
			t.Errorf("Load with %q = %q, want an error at results", bad, lines)
		}
	}
}
