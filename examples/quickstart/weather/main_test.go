package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv, when set, makes the test binary run as the weather server, so
// that the test below talks to main over real stdio without a build step.
const serveEnv = "MST_QUICKSTART_WEATHER_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestServesOverStdio(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	client := mcp.NewClient(&mcp.Implementation{Name: "weather-test", Version: "1"}, nil)
	session, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to the weather server: %v", err)
	}
	defer session.Close()

	tools, err := session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools = %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	want := []string{"wx_alerts", "wx_cities", "wx_convert", "wx_forecast", "wx_now"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("ListTools names mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		tool      string
		args      map[string]any
		wantText  string // a part of the result text
		wantError bool
	}{
		{"wx_now", map[string]any{"city": "Lisbon"}, "sunny, 22°C", false},
		{"wx_forecast", map[string]any{"city": "oslo", "days": 2}, "Tomorrow: rain, high 8°C", false},
		{"wx_forecast", map[string]any{"city": "Atlantis"}, "known cities: Cairo, Lisbon", true},
		{"wx_forecast", map[string]any{"city": "Oslo", "days": 9}, "between 1 and 7", true},
		{"wx_alerts", map[string]any{"region": "the North Sea"}, "Gale warning", false},
		{"wx_alerts", map[string]any{"region": "Baltic"}, "No active alerts for Baltic", false},
		{"wx_convert", map[string]any{"value": 30, "from": "celsius", "to": "fahrenheit"}, "30 celsius = 86 fahrenheit", false},
		{"wx_convert", map[string]any{"value": 300, "from": "kelvin", "to": "celsius"}, "= 26.85 celsius", false},
		{"wx_convert", map[string]any{"value": -500, "from": "fahrenheit", "to": "kelvin"}, "below absolute zero", true},
		{"wx_cities", map[string]any{}, "Reykjavik (snow showers)", false},
	}
	for _, tt := range tests {
		res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil {
			t.Errorf("CallTool(%s, %v) = %v", tt.tool, tt.args, err)
			continue
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !strings.Contains(text.String(), tt.wantText) || res.IsError != tt.wantError {
			t.Errorf("CallTool(%s, %v) = %q (error %v), want it to contain %q (error %v)",
				tt.tool, tt.args, text.String(), res.IsError, tt.wantText, tt.wantError)
		}
	}
}
