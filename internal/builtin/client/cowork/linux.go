package cowork

import (
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
)

// linuxProfile is what MST knows of Claude Desktop's Linux build: the
// window and control names below are MST's best knowledge, not yet
// checked against the app (it cannot be installed where MST is tested).
// A machine whose app differs gives the right names in the JSON file
// MST_DESKTOP_PROFILE names; docs/desktop.md says how to find them.
var linuxProfile = desktop.Profile{
	App:          "Claude",
	Window:       "Claude",
	Input:        atspi.Match{Role: "entry", Name: "Write your prompt to Claude"},
	Send:         atspi.Match{Role: "push button", Name: "Send message"},
	NewChat:      atspi.Match{Role: "push button", Name: "New chat"},
	Conversation: atspi.Match{Role: "document web", Name: "Claude"},
	BusyControl:  atspi.Match{Role: "push button", Name: "Stop response"},
	AnswerMarker: "Claude",
	StrayDismiss: []string{"Close", "Not now", "Later", "Dismiss", "Got it"},
	Log:          "~/.config/Claude/logs/main.log",
	SettingsPath: "/etc/claude-desktop/managed-settings.json",
	Package:      "claude-desktop",
	ReadySeconds: 180,
}
