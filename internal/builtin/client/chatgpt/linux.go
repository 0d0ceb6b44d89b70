package chatgpt

import (
	"github.com/mst-eval/mst/internal/builtin/client/desktop"
	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
)

// linuxProfile is what MST knows of the ChatGPT desktop app on Linux: the
// names below are MST's best knowledge, not yet checked against the app
// (it cannot be installed where MST is tested). A machine whose app
// differs gives the right names in the JSON file MST_DESKTOP_PROFILE
// names; docs/desktop.md says how to find them.
var linuxProfile = desktop.Profile{
	App:          "ChatGPT",
	Window:       "ChatGPT",
	Input:        atspi.Match{Role: "entry", Name: "Message ChatGPT"},
	Send:         atspi.Match{Role: "push button", Name: "Send prompt"},
	NewChat:      atspi.Match{Role: "push button", Name: "New chat"},
	Conversation: atspi.Match{Role: "document web", Name: "ChatGPT"},
	BusyControl:  atspi.Match{Role: "push button", Name: "Stop streaming"},
	AnswerMarker: "ChatGPT said:",
	StrayDismiss: []string{"Close", "Not now", "Later", "Dismiss", "Got it"},
	Log:          "~/.config/ChatGPT/logs/main.log",
	SettingsPath: "/etc/chatgpt-desktop/managed-settings.json",
	Package:      "chatgpt-desktop",
	ReadySeconds: 120,
}
