package codexapp

import (
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
)

// linuxProfile is what MST knows of the Codex surface of the ChatGPT
// desktop app on Linux: the names below are MST's best knowledge, not yet
// checked against the app (it cannot be installed where MST is tested).
// A machine whose app differs gives the right names in the JSON file
// MST_DESKTOP_PROFILE names; docs/desktop.md says how to find them.
var linuxProfile = desktop.Profile{
	App:          "ChatGPT",
	Window:       "Codex",
	Input:        atspi.Match{Role: "entry", Name: "Ask Codex"},
	Send:         atspi.Match{Role: "push button", Name: "Send"},
	NewChat:      atspi.Match{Role: "push button", Name: "New task"},
	Conversation: atspi.Match{Role: "document web", Name: "Codex"},
	BusyControl:  atspi.Match{Role: "push button", Name: "Stop"},
	AnswerMarker: "Codex said:",
	StrayDismiss: []string{"Close", "Not now", "Later", "Dismiss", "Got it"},
	Log:          "~/.config/ChatGPT/logs/main.log",
	SettingsPath: "/etc/chatgpt-desktop/managed-settings.json",
	Package:      "chatgpt-desktop",
	ReadySeconds: 120,
}
