package provider

import (
	"strings"
	"testing"
)

// TestCheckBaseURL: a base URL whose path ends in a leading or trailing
// part of a path the client appends is refused with the option, the path
// and the value to write; others pass.
func TestCheckBaseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		appends []string
		bad     map[string]string // value -> the fix the error offers
		good    []string
	}{
		{
			appends: []string{"/v1/messages"},
			bad: map[string]string{
				"http://127.0.0.1:9/v1":                 "http://127.0.0.1:9",
				"http://127.0.0.1:9/v1/":                "http://127.0.0.1:9",
				"https://gw.example/anthropic/v1":       "https://gw.example/anthropic",
				"https://api.anthropic.com/v1/messages": "https://api.anthropic.com",
				"https://gw.example/messages?x=1":       "https://gw.example?x=1",
			},
			good: []string{"", "http://127.0.0.1:9", "http://127.0.0.1:9/", "https://gw.example/anthropic", "https://gw.example/v10", "https://gw.example/v1beta"},
		},
		{
			appends: []string{"/responses", "/chat/completions"},
			bad: map[string]string{
				"http://localhost:11434/v1/chat/completions": "http://localhost:11434/v1",
				"https://api.openai.com/v1/responses":        "https://api.openai.com/v1",
				"https://gw.example/v1/chat":                 "https://gw.example/v1",
				"https://gw.example/v1/completions/":         "https://gw.example/v1",
			},
			good: []string{"http://localhost:11434/v1", "https://api.groq.com/openai/v1", "https://gw.example/v1beta/openai"},
		},
	} {
		for raw, fixed := range tc.bad {
			err := CheckBaseURL("clientOptions.baseURL", raw, "the client", tc.appends...)
			if err == nil {
				t.Errorf("appends %v: %q passes, want it refused", tc.appends, raw)
				continue
			}
			for _, want := range []string{"clientOptions.baseURL: ", `"` + raw + `"`, "the client appends", `write "` + fixed + `"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("appends %v: %q: %v; want it to say %s", tc.appends, raw, err, want)
				}
			}
		}
		for _, raw := range tc.good {
			if err := CheckBaseURL("clientOptions.baseURL", raw, "the client", tc.appends...); err != nil {
				t.Errorf("appends %v: %q: %v, want it to pass", tc.appends, raw, err)
			}
		}
	}
	for _, raw := range []string{"localhost:8080", "ftp://h/x", "/v1", "http://"} {
		if err := CheckBaseURL("o", raw, "c", "/v1/messages"); err == nil || !strings.Contains(err.Error(), "absolute http or https") {
			t.Errorf("%q: %v, want it refused as not an http URL", raw, err)
		}
	}
}
