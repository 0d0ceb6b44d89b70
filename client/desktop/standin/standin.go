// Package standin is the stand-in desktop chat app that MST's desktop
// client tests drive through the accessibility bus in place of Claude
// Desktop or ChatGPT: a Python 3 and GTK 3 program (app.py) and the
// profile of its window for MST's desktop automation (profile.json). See
// README.md.
package standin

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
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
