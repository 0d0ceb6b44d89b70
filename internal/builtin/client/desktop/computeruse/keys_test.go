package computeruse

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []chord
	}{
		{"Return", []chord{{code: 0x24}}},
		{"KP_Enter", []chord{{code: 0x4C}}},
		{"Tab", []chord{{code: 0x30}}},
		{"Escape", []chord{{code: 0x35}}},
		{"BackSpace", []chord{{code: 0x33}}},
		{"Delete", []chord{{code: 0x75}}},
		{"Page_Down", []chord{{code: 0x79}}},
		{"F5", []chord{{code: 0x60}}},
		{"a", []chord{{code: 0x00}}},
		{"cmd+a", []chord{{mods: []int{0x37}, flags: flagCommand, code: 0x00}}},
		{"super+V", []chord{{mods: []int{0x37}, flags: flagCommand, code: 0x09}}},
		{"ctrl+shift+t", []chord{{mods: []int{0x3B, 0x38}, flags: flagControl | flagShift, code: 0x11}}},
		{"alt+Left", []chord{{mods: []int{0x3A}, flags: flagOption, code: 0x7B}}},
		{"shift+Return", []chord{{mods: []int{0x38}, flags: flagShift, code: 0x24}}},
		{"cmd+shift", []chord{{mods: []int{0x37, 0x38}, flags: flagCommand | flagShift, code: -1}}},
		{"question", []chord{{mods: []int{0x38}, flags: flagShift, code: 0x2C}}},
		{"!", []chord{{mods: []int{0x38}, flags: flagShift, code: 0x12}}},
		{"shift+!", []chord{{mods: []int{0x38}, flags: flagShift, code: 0x12}}},
		{"cmd+plus", []chord{{mods: []int{0x37, 0x38}, flags: flagCommand | flagShift, code: 0x18}}},
		{"cmd++", []chord{{mods: []int{0x37, 0x38}, flags: flagCommand | flagShift, code: 0x18}}},
		{"fn+F11", []chord{{mods: []int{0x3F}, flags: flagFn, code: 0x67}}},
		{"cmd+a BackSpace", []chord{{mods: []int{0x37}, flags: flagCommand, code: 0x00}, {code: 0x33}}},
	} {
		got, err := parseKeys(tc.in)
		if err != nil {
			t.Errorf("parseKeys(%q) = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(chord{})); diff != "" {
			t.Errorf("parseKeys(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseKeysErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             "no key given",
		"Hyper":        `unknown key name "Hyper"`,
		"cmd+":         "empty name",
		"a+cmd":        `"a" is not a modifier`,
		"ctrl+é":       `unknown key name "é"`,
		"cmd+Return+a": `"Return" is not a modifier`,
	} {
		if _, err := parseKeys(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseKeys(%q) error = %v, want one containing %q", in, err, want)
		}
	}
}

func TestParseModifiers(t *testing.T) {
	t.Parallel()
	got, err := parseModifiers(" cmd+Shift ")
	want := chord{mods: []int{0x37, 0x38}, flags: flagCommand | flagShift, code: -1}
	if err != nil || !cmp.Equal(want, got, cmp.AllowUnexported(chord{})) {
		t.Errorf("parseModifiers(cmd+Shift) = %+v, %v; want %+v", got, err, want)
	}
	if got, err := parseModifiers(""); err != nil || got.flags != 0 || len(got.mods) != 0 {
		t.Errorf("parseModifiers(\"\") = %+v, %v; want none", got, err)
	}
	if _, err := parseModifiers("shift+a"); err == nil {
		t.Error("parseModifiers(shift+a) succeeded, want an error: a is not a modifier")
	}
}
