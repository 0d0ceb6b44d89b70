package cli_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/internal/cli"
)

// update rewrites the golden files of this package, and docs/clients.md,
// from what the code produces now: go test ./internal/cli -update.
var update = flag.Bool("update", false, "rewrite golden files and docs/clients.md from the current output")

// runMST runs mst in-process and returns its stdout, failing the test
// unless it exits with code 0.
func runMST(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Main(t.Context(), args, cli.Stdio{Out: &stdout, Err: &stderr}); code != 0 {
		t.Fatalf("mst %v exited %d\n%s", args, code, stderr.String())
	}
	return stdout.Bytes()
}

// checkGolden compares got with the file at path, or rewrites the file
// with -update.
func checkGolden(t *testing.T, path string, got []byte, regenerate string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; create it with %s", err, regenerate)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is out of date (-file +generated):\n%s\nIf the change is intended, regenerate it with %s", path, diff, regenerate)
	}
}

// TestClientsJSON pins mst clients --json, as seen from Linux.
func TestClientsJSON(t *testing.T) {
	t.Parallel()
	got := runMST(t, "clients", "--json", "--os", "linux")
	checkGolden(t, filepath.Join("testdata", "clients.golden.json"), got, "go test ./internal/cli -run TestClientsJSON -update")

	var doc struct {
		Kind    string           `json:"kind"`
		Version int              `json:"version"`
		Clients []map[string]any `json:"clients"`
	}
	if err := json.Unmarshal(got, &doc); err != nil || doc.Kind != "mst.clients" || doc.Version != 1 {
		t.Fatalf("mst clients --json is not an mst.clients version 1 object (%v): %.200s", err, got)
	}
	list := doc.Clients
	var names []string
	for _, c := range list {
		names = append(names, c["name"].(string))
		for _, key := range []string{"name", "description", "os", "credentials", "setup", "available", "concurrent", "caseOverrides", "options"} {
			if _, ok := c[key]; !ok {
				t.Errorf("mst clients --json: client %v has no %q", c["name"], key)
			}
		}
		if _, ok := c["availableError"]; ok == c["available"].(bool) {
			t.Errorf("mst clients --json: client %v: available %v with availableError %v", c["name"], c["available"], c["availableError"])
		}
	}
	if diff := cmp.Diff(builtin.Clients().Names(), names); diff != "" {
		t.Errorf("mst clients --json names (-registered +printed):\n%s", diff)
	}
}

// TestClientsShowJSON pins mst clients show claude-code --json and checks
// that it says what the list says about the same client.
func TestClientsShowJSON(t *testing.T) {
	t.Parallel()
	got := runMST(t, "clients", "show", "claude-code", "--json", "--os", "linux")
	checkGolden(t, filepath.Join("testdata", "clients-show-claude-code.golden.json"), got, "go test ./internal/cli -run TestClientsShowJSON -update")

	var show map[string]any
	if err := json.Unmarshal(got, &show); err != nil {
		t.Fatalf("mst clients show --json is not a JSON object: %v", err)
	}
	if show["kind"] != "mst.client" || show["version"] != 1.0 {
		t.Errorf("mst clients show --json: kind %v, version %v; want mst.client, 1", show["kind"], show["version"])
	}
	delete(show, "kind")
	delete(show, "version")
	var doc struct {
		Clients []map[string]any `json:"clients"`
	}
	if err := json.Unmarshal(runMST(t, "clients", "--json", "--os", "linux"), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Clients {
		if c["name"] == "claude-code" {
			if diff := cmp.Diff(c, show); diff != "" {
				t.Errorf("show claude-code and the list disagree (-list +show):\n%s", diff)
			}
			return
		}
	}
	t.Errorf("mst clients --json does not list claude-code")
}

// TestClientsJSONKeepsSchemasAsDeclared checks that the JSON forms carry
// each client's options schema as its definition declares it: listing
// fills in nothing.
func TestClientsJSONKeepsSchemasAsDeclared(t *testing.T) {
	t.Parallel()
	var doc struct {
		Clients []struct {
			Name    string          `json:"name"`
			Options json.RawMessage `json:"options"`
		} `json:"clients"`
	}
	if err := json.Unmarshal(runMST(t, "clients", "--json"), &doc); err != nil {
		t.Fatal(err)
	}
	reg := builtin.Clients()
	for _, c := range doc.Clients {
		d, err := reg.Lookup(c.Name)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		json.Unmarshal(c.Options, &got)
		json.Unmarshal(d.Options, &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("client %s: printed options schema differs from its definition (-definition +printed):\n%s", c.Name, diff)
		}
	}
}

// TestDocs fails when docs/clients.md differs from what the client
// definitions generate.
func TestDocs(t *testing.T) {
	t.Parallel()
	got := cli.ClientsMarkdown(builtin.Clients())
	checkGolden(t, filepath.Join("..", "..", "docs", "clients.md"), got,
		"go run ./cmd/mst clients --markdown > docs/clients.md (or go test ./internal/cli -run TestDocs -update)")
	if out := runMST(t, "clients", "--markdown"); !bytes.Equal(out, got) {
		t.Errorf("mst clients --markdown differs from ClientsMarkdown")
	}
}
