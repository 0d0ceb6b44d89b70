package toolname

import "testing"

func TestClean(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"get_forecast", "get_forecast"},
		{"get-forecast", "get-forecast"},
		{"get.forecast", "get_forecast"},
		{"wetter für morgen", "wetter_f_r_morgen"},
		{"天気", ""},
		{"..a..b..", "a_b"},
		{"a__b", "a__b"},
		{"_x_", "x"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Clean(tt.in); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
