package desktop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/builtin/client/desktop/atspi"
)

// ProfileEnv names a JSON file that replaces the built-in profile of
// every desktop client on this machine: the one place to change when an
// app's next version renames a control, and how the tests point a client
// at the stand-in app.
const ProfileEnv = "MST_DESKTOP_PROFILE"

// Profile is what MST knows of one desktop app's Linux build: how to find
// its window and controls on the accessibility bus, how it shows that it
// is busy, where it keeps its managed settings, its log and its own
// conversation record, and how to read its version. Nothing else in the
// desktop clients is specific to an app.
type Profile struct {
	// App is the app's name on the accessibility bus (GTK and Electron
	// name it after the program).
	App string `json:"app"`
	// Window is the main window's title.
	Window string `json:"window"`
	// Input is the message box; Send, the control that sends it; NewChat,
	// the control that starts a new conversation; Conversation, the text
	// that shows it; Status, a label that says whether the app is busy;
	// Servers, one that lists the MCP servers it connected (optional).
	Input        atspi.Match `json:"input"`
	Send         atspi.Match `json:"send"`
	NewChat      atspi.Match `json:"newChat"`
	Conversation atspi.Match `json:"conversation"`
	Status       atspi.Match `json:"status"`
	Servers      atspi.Match `json:"servers,omitzero"`
	// BusyControl, for an app with no status label, is a control that
	// shows only while the app works (a stop button): the app is busy
	// while it is there and idle otherwise.
	BusyControl atspi.Match `json:"busyControl,omitzero"`
	// Busy and Idle are the status texts that mean working and ready;
	// ErrorPrefix starts a status that reports a failure.
	Busy        []string `json:"busy"`
	Idle        []string `json:"idle"`
	ErrorPrefix string   `json:"errorPrefix"`
	// PromptMarker and AnswerMarker start the conversation's lines of the
	// user's prompt and of the app's answer.
	PromptMarker string `json:"promptMarker,omitempty"`
	AnswerMarker string `json:"answerMarker"`
	// StrayDismiss names the buttons that close a window that is not the
	// main one (an update prompt, a tip): MST presses the first it finds.
	StrayDismiss []string `json:"strayDismiss,omitempty"`
	// NativeDir is the folder of the app's own conversation records ("~"
	// is HOME), read in NativeFormat ("anthropic-messages"); "" when the
	// app keeps none MST can read.
	NativeDir    string `json:"nativeDir,omitempty"`
	NativeFormat string `json:"nativeFormat,omitempty"`
	// Log is the app's log file, whose tail a diagnosis shows.
	Log string `json:"log,omitempty"`
	// SettingsPath is the managed-settings file MST writes in owned-desktop
	// mode, in SettingsFormat ("claude-desktop": an mcpServers object).
	SettingsPath   string `json:"settingsPath"`
	SettingsFormat string `json:"settingsFormat,omitempty"`
	// Package is the Debian package whose version is the app's; when
	// VersionCommand is set, its output is the version instead.
	Package        string   `json:"package,omitempty"`
	VersionCommand []string `json:"versionCommand,omitempty"`
	// ReadySeconds bounds the wait for the app after a restart (default 120).
	ReadySeconds int `json:"readySeconds,omitempty"`
}

// ProfileDir holds a machine's profiles, one per client (cowork.json): a
// desktop image that adds an app puts its profile there.
const ProfileDir = "/etc/mst/desktop"

// LoadProfile returns the client's profile: the file ProfileEnv names, or
// else ProfileDir/CLIENT.json when it exists, over builtin (fields a file
// leaves out keep builtin's values), checked.
func LoadProfile(clientName string, builtin Profile) (Profile, error) {
	p := builtin
	path := os.Getenv(ProfileEnv)
	if path == "" {
		if f := filepath.Join(ProfileDir, clientName+".json"); fileExists(f) {
			path = f
		}
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Profile{}, fmt.Errorf("reading the desktop profile %s names: %w", ProfileEnv, err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return Profile{}, fmt.Errorf("the desktop profile %s (%s): %w", path, ProfileEnv, err)
		}
	}
	if err := p.check(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (p Profile) check() error {
	var missing []string
	for name, empty := range map[string]bool{
		"app": p.App == "", "window": p.Window == "", "input": p.Input == (atspi.Match{}),
		"send": p.Send == (atspi.Match{}), "newChat": p.NewChat == (atspi.Match{}),
		"conversation":          p.Conversation == (atspi.Match{}),
		"status or busyControl": p.Status == (atspi.Match{}) && p.BusyControl == (atspi.Match{}),
		"idle":                  len(p.Idle) == 0 && p.Status != (atspi.Match{}), "answerMarker": p.AnswerMarker == "", "settingsPath": p.SettingsPath == "",
	} {
		if empty {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("the desktop profile for %q lacks %s (set them in the JSON file %s names)", p.App, strings.Join(missing, ", "), ProfileEnv)
	}
	switch p.NativeFormat {
	case "", "anthropic-messages":
	default:
		return fmt.Errorf("the desktop profile for %q: nativeFormat %q is not one MST reads (anthropic-messages)", p.App, p.NativeFormat)
	}
	switch p.SettingsFormat {
	case "", "claude-desktop":
	default:
		return fmt.Errorf("the desktop profile for %q: settingsFormat %q is not one MST writes (claude-desktop)", p.App, p.SettingsFormat)
	}
	return nil
}

// expand replaces a leading "~" with home.
func expand(path, home string) string {
	if path == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return path
}

func (p Profile) readyTimeout() int {
	if p.ReadySeconds > 0 {
		return p.ReadySeconds
	}
	return 120
}
