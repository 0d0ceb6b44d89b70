package transcript

import "testing"

func TestNormalizeOldNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind, client string
		telemetry    map[string]any
		wantClient   string
	}{
		{"mst.trace", "mst", nil, "api"},
		{"mst.transcript", "codex", nil, "codex-cli"},
		{"mst.transcript", "chatgpt", map[string]any{"surface": "codex"}, "codex-app"},
		{"mst.transcript", "chatgpt", nil, "chatgpt"},
		{"mst.transcript", "claude-code", nil, "claude-code"},
	}
	for _, tt := range tests {
		tr := &Transcript{Kind: tt.kind, Client: ClientInfo{Name: tt.client}, ClientTelemetry: tt.telemetry}
		tr.Normalize()
		if tr.Client.Name != tt.wantClient || tr.Kind != "mst.transcript" {
			t.Errorf("Normalize(%s, %s) = %s, %s; want mst.transcript, %s", tt.kind, tt.client, tr.Kind, tr.Client.Name, tt.wantClient)
		}
	}
}
