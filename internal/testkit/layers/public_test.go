package layers

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPublicAPI keeps the packages a plugin can import equal to the list
// docs/plugins/README.md gives under "What is public and what is stable":
// a package added outside internal/ must be documented there (or moved
// under internal/), and a documented one must exist.
func TestPublicAPI(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/plugins/README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## What is public and what is stable"
	_, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/plugins/README.md has no section %q", heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9/]*)`").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	var public []string
	for name, p := range load(t) {
		if p.Name == "main" || name == "" || within(name, "internal") || within(name, "examples") || strings.Contains(name, "/internal/") {
			continue
		}
		public = append(public, name)
	}
	slices.Sort(documented)
	slices.Sort(public)
	for _, p := range public {
		if !slices.Contains(documented, p) {
			t.Errorf("%s can be imported from outside MST but docs/plugins/README.md does not list it: document it as API, or move it under internal/", p)
		}
	}
	for _, d := range documented {
		if !slices.Contains(public, d) {
			t.Errorf("docs/plugins/README.md lists %s as API, but the module has no such public package", d)
		}
	}
	if len(public) < 10 {
		t.Errorf("found %d public packages (%q); the list is not being read", len(public), public)
	}
}
