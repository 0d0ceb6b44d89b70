package servers

import "testing"

func TestValidHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"Authorization", "Bearer abc.def", true},
		{"X-Api-Key", "k\tv", true},
		{"X_Custom.1~", "ünïcode bytes", true},
		{"", "v", false},
		{"X Api Key", "v", false},
		{"X-Api-Key:", "v", false},
		{"Schlüssel", "v", false},
		{"X-Api-Key", "line\nbreak", false},
		{"X-Api-Key", "carriage\rreturn", false},
		{"X-Api-Key", "nul\x00", false},
		{"X-Api-Key", "del\x7f", false},
	} {
		if got := validHeaderName(tc.name) && validHeaderValue(tc.value); got != tc.ok {
			t.Errorf("valid header %q: %q = %v, want %v", tc.name, tc.value, got, tc.ok)
		}
	}
}
