package transcript

import "encoding/json"

// Renamed clients: names stored runs may hold, and what they are now.
// Readers map them; stored files are never rewritten.
var renamedClients = map[string]string{
	"mst":   "api",
	"codex": "codex-cli",
}

// CanonicalClient returns the current name of a client as a stored run
// recorded it: "mst" is api, "codex" is codex-cli, and chatgpt on its Codex
// surface is codex-app.
func CanonicalClient(name string, telemetry map[string]any) string {
	if n, ok := renamedClients[name]; ok {
		return n
	}
	if name == "chatgpt" && telemetry["surface"] == "codex" {
		return "codex-app"
	}
	return name
}

// Normalize brings a transcript read from disk to the current names: the
// old kind "mst.trace" and the old client names. It changes only the value
// in memory.
func (t *Transcript) Normalize() {
	if t.Kind == "mst.trace" || t.Kind == "" {
		t.Kind = "mst.transcript"
	}
	t.Client.Name = CanonicalClient(t.Client.Name, t.ClientTelemetry)
}

// Decode reads a transcript from its JSON, old names included.
func Decode(b []byte) (*Transcript, error) {
	var t Transcript
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	t.Normalize()
	return &t, nil
}
