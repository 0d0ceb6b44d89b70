package offline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStem(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"cities", "city"},
		{"watches", "watch"},
		{"boxes", "box"},
		{"alerts", "alert"},
		{"degrees", "degree"},
		{"days", "day"},
		{"celsius", "celsius"},
		{"analysis", "analysis"},
		{"class", "class"},
		{"gas", "gas"},
		{"warning", "warn"},
		{"warnings", "warn"},
		{"raining", "rain"},
		{"string", "string"},
		{"thing", "thing"},
		{"converted", "convert"},
		{"listed", "list"},
		{"speed", "speed"},
		{"used", "used"},
		{"red", "red"},
	}
	for _, tt := range tests {
		if got := stem(tt.in); got != tt.want {
			t.Errorf("stem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestContentWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"get_current_conditions", []string{"current", "condition"}},
		{"getForecast", []string{"forecast"}},
		{"HTTPServer-status.v2", []string{"http", "server", "status", "v2"}},
		{"What's the temperature in Lisbon right now?", []string{"temperature", "lisbon", "right", "now"}},
		{"Will it rain over the next 3 days?", []string{"rain", "next", "day"}},
		{"Tell me about it, please.", nil},
	}
	for _, tt := range tests {
		got := contentWords(tt.in, nil)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("contentWords(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestScanPrompt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in          string
		wantNumbers []float64
		wantStrings []string
		wantLast    string
	}{
		{
			in:          "Are there any storm warnings for the North Sea region?",
			wantStrings: []string{"North Sea"},
			wantLast:    "region",
		},
		{
			in:          `Search "blue whale" and 'red fox' but not what's here`,
			wantStrings: []string{"blue whale", "red fox"},
			wantLast:    "fox", // "what's" is "what", a stop word
		},
		{
			in:          "Oslo is cold. Is Bergen colder than New York's -3.5 or 7?",
			wantNumbers: []float64{-3.5, 7},
			wantStrings: []string{"Bergen", "New York"},
			wantLast:    "York",
		},
		{
			in:          "Should I pack boots for Reykjavik, Oslo or Tromsø?",
			wantStrings: []string{"Reykjavik", "Oslo", "Tromsø"},
			wantLast:    "Tromsø",
		},
		{
			in:          "Between 5-7 days, NaN or Inf times 30°C",
			wantNumbers: []float64{5, 7, 30},
			wantStrings: []string{"NaN", "Inf"},
			wantLast:    "times",
		},
	}
	for _, tt := range tests {
		p := scanPrompt(tt.in)
		if diff := cmp.Diff(tt.wantNumbers, p.numbers); diff != "" {
			t.Errorf("scanPrompt(%q) numbers mismatch (-want +got):\n%s", tt.in, diff)
		}
		if diff := cmp.Diff(tt.wantStrings, p.strings); diff != "" {
			t.Errorf("scanPrompt(%q) strings mismatch (-want +got):\n%s", tt.in, diff)
		}
		if p.last != tt.wantLast {
			t.Errorf("scanPrompt(%q) last = %q, want %q", tt.in, p.last, tt.wantLast)
		}
	}
}
