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

// TestGemini checks the Gemini CLI's names of MCP tools: mcp_ and the
// server first, each UTF-16 code unit outside [A-Za-z0-9_.:-] as "_", and
// a name past 63 characters cut to its first and last 30 around "...".
// The names wanted are what the CLI's own generateValidName (0.61) gives,
// run in Node.
func TestGemini(t *testing.T) {
	t.Parallel()
	tests := []struct{ server, tool, want string }{
		{"everything", "echo", "mcp_everything_echo"},
		{"my_server", "get-sum", "mcp_my_server_get-sum"},
		{"many", "météo_prévision", "mcp_many_m_t_o_pr_vision"},
		{"w", "a.b:c", "mcp_w_a.b:c"},
		{"we ird", "greet (structured)", "mcp_we_ird_greet__structured_"},
		{"w", "天気", "mcp_w___"},
		{"w", "sun☀", "mcp_w_sun_"},
		{"w", "owl🦉", "mcp_w_owl__"}, // two UTF-16 code units, two "_"
		{"mcp_x", "tool", "mcp_x_tool"},
		{"many", "summarise_the_quarterly_inventory_of_a_warehouse_region", "mcp_many_summarise_the_quarter...nventory_of_a_warehouse_region"},
		{"s", "t23456789012345678901234567890123456789012345678901234567", "mcp_s_t23456789012345678901234567890123456789012345678901234567"},
	}
	for _, tt := range tests {
		got := Gemini(tt.server, tt.tool)
		if got != tt.want {
			t.Errorf("Gemini(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
		if len(got) > geminiMaxName {
			t.Errorf("Gemini(%q, %q) = %q, %d characters, longer than the CLI's %d", tt.server, tt.tool, got, len(got), geminiMaxName)
		}
	}
}
