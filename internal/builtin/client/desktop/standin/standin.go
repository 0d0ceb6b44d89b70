// Package standin is the stand-in desktop chat app that MST's desktop
// client tests drive through the accessibility bus in place of Claude
// Desktop or ChatGPT: a Python 3 and GTK 3 program (app.py) and the
// profile of its window for MST's desktop automation (profile.json). See
// README.md.
package standin

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// App is app.py, the stand-in, to run with Debian's /usr/bin/python3.
//
//go:embed app.py
var App []byte

// Profile is profile.json: the roles and names of the stand-in's
// controls, its status words and where it keeps its record and log.
//
//go:embed profile.json
var Profile []byte

// Write writes app.py (mode 0755) and profile.json (0644) into dir,
// making dir if needed, and returns their paths. Each file is replaced
// whole (written beside and renamed), so a running copy never reads half
// of one.
func Write(dir string) (appPath, profilePath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("standin: %w", err)
	}
	appPath = filepath.Join(dir, "app.py")
	profilePath = filepath.Join(dir, "profile.json")
	if err := writeFile(appPath, App, 0o755); err != nil {
		return "", "", err
	}
	if err := writeFile(profilePath, Profile, 0o644); err != nil {
		return "", "", err
	}
	return appPath, profilePath, nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("standin: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("standin: writing %s: %w", path, err)
	}
	return nil
}

// AppPath and ProfilePath are where Package installs the app and its
// profile (as cowork's: MST reads /etc/mst/desktop/CLIENT.json).
const (
	AppPath     = "/opt/mst-standin/app.py"
	ProfilePath = "/etc/mst/desktop/cowork.json"
	// Command starts the installed app (a desktop image's MST_DESKTOP_APP).
	Command = "/usr/bin/python3 " + AppPath
)

// Package builds a Debian package of the stand-in in dir with dpkg-deb,
// the way a desktop app is added to the desktop worker image: the app at
// AppPath, and its profile at ProfilePath with the installed paths. It
// returns the package's path.
func Package(dir string) (string, error) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		return "", fmt.Errorf("standin: dpkg-deb builds the stand-in's package (Debian: apt-get install dpkg): %w", err)
	}
	var prof map[string]any
	if err := json.Unmarshal(Profile, &prof); err != nil {
		return "", fmt.Errorf("standin: profile.json: %w", err)
	}
	prof["versionCommand"] = []string{"/usr/bin/python3", AppPath, "--version"}
	profile, _ := json.MarshalIndent(prof, "", "  ")
	root := filepath.Join(dir, "root")
	files := map[string][]byte{
		"DEBIAN/control": []byte("Package: mst-standin\nVersion: 1.0.0\nArchitecture: all\nMaintainer: MST <mst@example.invalid>\n" +
			"Depends: python3, python3-gi, gir1.2-gtk-3.0\nDescription: stand-in desktop chat app for MST's tests\n"),
		strings.TrimPrefix(AppPath, "/"):     App,
		strings.TrimPrefix(ProfilePath, "/"): profile,
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("standin: %w", err)
		}
		if err := os.WriteFile(p, data, 0o755); err != nil {
			return "", fmt.Errorf("standin: %w", err)
		}
	}
	deb := filepath.Join(dir, "mst-standin_1.0.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		return "", fmt.Errorf("standin: dpkg-deb --build: %v: %s", err, out)
	}
	return deb, nil
}
