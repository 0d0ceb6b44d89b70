package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/ground/tailbuf"
	"github.com/mst-eval/mst/servers"
)

// Owned-desktop mode. On a machine made for MST (the desktop worker
// image), OwnedEnv=1 lets MST write the app's managed settings for each
// variant, run RestartEnv's command so the app reads them, and put the
// file back as it was at the end. Without it MST changes nothing on the
// machine, and a Linux desktop client refuses to open: its trials need
// the app to reach the variant's servers through MST.
const (
	OwnedEnv   = "MST_DESKTOP_OWNED"
	RestartEnv = "MST_DESKTOP_RESTART"
)

// keptSuffix names the copy of the managed-settings file as it was before
// MST first wrote it, kept beside it until MST puts it back: a run that
// crashes leaves it, and the next run restores from it.
const keptSuffix = ".mst-kept"

// absentMark is the kept copy's content when there was no file at all.
const absentMark = "\x00mst: no file\n"

// owned reports whether this machine is an owned desktop.
func owned() bool { return os.Getenv(OwnedEnv) == "1" }

// settingsFor is the managed settings that give the app the variant's
// servers, in the profile's format. The servers keep the variant's order
// (an app that offers two servers' tools of one name may rename the
// later one's).
func settingsFor(format string, list []servers.Server) ([]byte, error) {
	switch format {
	case "", "claude-desktop":
		type server struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers,omitempty"`
		}
		var buf bytes.Buffer
		buf.WriteString("{\n  \"mcpServers\": {")
		for i, s := range list {
			if i > 0 {
				buf.WriteString(",")
			}
			name, _ := json.Marshal(s.Name)
			value, err := json.MarshalIndent(server{Type: "http", URL: s.URL, Headers: s.Headers}, "    ", "  ")
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&buf, "\n    %s: %s", name, value)
		}
		buf.WriteString("\n  }\n}\n")
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("settings format %q is not one MST writes", format)
}

// writeSettings writes data to path, keeping the file as it was the first
// time (keep), and checks it reads back.
func writeSettings(path string, data []byte) error {
	kept := path + keptSuffix
	if _, err := os.Stat(kept); errors.Is(err, fs.ErrNotExist) {
		orig, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			orig = []byte(absentMark)
		case err != nil:
			return fmt.Errorf("reading the app's managed settings %s before changing them: %w", path, err)
		}
		if err := atomicfile.Write(kept, orig); err != nil {
			return fmt.Errorf("keeping a copy of the app's managed settings (%s): %w; the desktop image makes its folder writable by the desktop user", kept, err)
		}
	}
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("writing the app's managed settings %s: %w (owned-desktop mode needs the file and its folder writable by the user MST runs as)", path, err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		return fmt.Errorf("the app's managed settings %s did not read back as written (%v)", path, err)
	}
	return nil
}

// restoreSettings puts the managed settings back as they were before MST
// first wrote them, and drops the kept copy. With no kept copy there is
// nothing to do.
func restoreSettings(path string) error {
	kept := path + keptSuffix
	orig, err := os.ReadFile(kept)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the kept copy of the app's managed settings %s: %w", kept, err)
	}
	if string(orig) == absentMark {
		err = os.Remove(path)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	} else {
		err = atomicfile.Write(path, orig)
	}
	if err != nil {
		return fmt.Errorf("restoring the app's managed settings %s: %w (the original is kept in %s)", path, err, kept)
	}
	return os.Remove(kept)
}

// restartTimeout bounds RestartEnv's command: it starts the app and
// returns; MST waits for the app's window itself.
const restartTimeout = 2 * time.Minute

// restart runs RestartEnv's command, with env (the keys the plan hands
// the client) added to MST's environment: the app it starts gets them.
func restart(ctx context.Context, env map[string]string) error {
	line := os.Getenv(RestartEnv)
	if strings.TrimSpace(line) == "" {
		return fmt.Errorf("%s is not set: in owned-desktop mode MST restarts the app after writing its settings with that command (the desktop worker image sets it)", RestartEnv)
	}
	cctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", line)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := tailbuf.New(4096)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if cctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("it did not finish within %s", restartTimeout)
		}
		return fmt.Errorf("restarting the app (%s): %w: %s", RestartEnv, err, strings.TrimSpace(out.String()))
	}
	return nil
}
