package docker

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mst-eval/mst/runner"
)

func TestTarRoundTrip(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	files := map[string]string{
		"bundle.json":      `{"shard": 1}`,
		"a/b.txt":          "first\nsecond\n",
		"a/deeper/empty":   "",
		"name with spaces": "kept",
	}
	writeFiles(t, src, files)
	os.MkdirAll(filepath.Join(src, "empty-folder"), 0o755)

	// writeTar names entries from the container's root, under the remote
	// folder; docker cp CONTAINER:/work/copied - names them from the
	// folder's own name. The two differ only by the leading folders.
	var packed bytes.Buffer
	if err := runner.WriteTar(&packed, src, "work/copied"); err != nil {
		t.Fatal(err)
	}
	var names []string
	var asDockerGives bytes.Buffer
	tr, tw := tar.NewReader(&packed), tar.NewWriter(&asDockerGives)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name)
		hdr.Name = strings.TrimPrefix(hdr.Name, "work/")
		tw.WriteHeader(hdr)
		if hdr.Typeflag == tar.TypeReg {
			var body bytes.Buffer
			body.ReadFrom(tr)
			tw.Write(body.Bytes())
		}
	}
	tw.Close()
	wantNames := []string{"work/copied/", "work/copied/a/", "work/copied/a/b.txt", "work/copied/a/deeper/",
		"work/copied/a/deeper/empty", "work/copied/bundle.json", "work/copied/empty-folder/", "work/copied/name with spaces"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("writeTar entries (-want +got):\n%s", diff)
	}

	dst := filepath.Join(t.TempDir(), "back")
	if err := runner.ReadTar(&asDockerGives, dst); err != nil {
		t.Fatalf("readTar = %v", err)
	}
	if diff := cmp.Diff(files, readFiles(t, dst)); diff != "" {
		t.Errorf("files after the round trip (-want +got):\n%s", diff)
	}
	if st, err := os.Stat(filepath.Join(dst, "empty-folder")); err != nil || !st.IsDir() {
		t.Errorf("the empty folder did not come back: %v", err)
	}
}

func TestReadTarOneFileOverAnOlderCopy(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "transcripts", "v", "c.t1.json")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	os.WriteFile(dst, []byte("an older, longer copy"), 0o644)
	stream := tarOf(t, map[string]string{"c.t1.json": `{"ok":true}`})
	if err := runner.ReadTar(stream, dst); err != nil {
		t.Fatalf("readTar = %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != `{"ok":true}` {
		t.Errorf("file = %q, want the new copy", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries, want the file alone (no temporary file left)", len(entries))
	}
}

func TestReadTarRefusesEscapes(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"copied/../../evil", "other/file"} {
		dir := t.TempDir()
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "copied/", Typeflag: tar.TypeDir, Mode: 0o755})
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
		tw.Write([]byte("x"))
		tw.Close()
		if err := runner.ReadTar(&buf, filepath.Join(dir, "copied")); err == nil {
			t.Errorf("readTar of an entry %q = nil, want an error", name)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
			t.Errorf("readTar wrote outside its folder for %q", name)
		}
	}
}

func TestBindMounts(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no bind mounts from Windows paths")
	}
	root := t.TempDir()
	mk := func(p string) string {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, nil, 0o755)
		return full
	}
	weather := mk("evals/bin/weather")
	other := mk("evals/bin/other")
	tools := mk("tools/server")
	mk("evals/data/x.json")
	config := filepath.Join(root, "evals", "eval.yaml")
	hp := runner.HostPaths{
		Commands:  []string{weather, "node", other, tools, "/usr/bin/python3"},
		Dirs:      []string{filepath.Join(root, "evals", "data"), filepath.Join(root, "elsewhere")},
		ConfigDir: filepath.Dir(config),
	}
	set := settings{mst: DefaultMST, workDir: DefaultWorkDir}
	// The bin folder is inside the config's folder, which the server with
	// a working folder there brings in; the missing folder is left out.
	want := []string{filepath.Join(root, "evals"), filepath.Join(root, "tools")}
	if diff := cmp.Diff(want, bindMounts(hp, set)); diff != "" {
		t.Errorf("bindMounts (-want +got):\n%s", diff)
	}
}

func TestBindMountsArgs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	db := filepath.Join(root, "data", "notes.sqlite")
	os.MkdirAll(filepath.Dir(db), 0o755)
	os.WriteFile(db, nil, 0o644)
	served := filepath.Join(root, "served")
	os.MkdirAll(served, 0o755)
	hp := runner.HostPaths{Args: []string{db, served, filepath.Join(root, "missing"), "/usr/share/zoneinfo", DefaultWorkDir + "/x", "/tmp"}}
	// The file alone and the folder whole; a missing path, a system
	// folder, the work folder and /tmp are left out.
	want := []string{db, served}
	if runtime.GOOS == "windows" {
		want = nil // Windows paths cannot be mounted at the same path
	}
	if diff := cmp.Diff(want, bindMounts(hp, settings{mst: DefaultMST, workDir: DefaultWorkDir})); diff != "" {
		t.Errorf("bindMounts (-want +got):\n%s", diff)
	}
}

func TestRunsInBareImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A dynamically linked program of this machine, copied out of the
	// system folders (which the check leaves to the image).
	sys, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatalf("reading /bin/true: %v", err)
	}
	dynamic := filepath.Join(dir, "dynamic")
	os.WriteFile(dynamic, sys, 0o755)
	script := filepath.Join(dir, "server.sh")
	os.WriteFile(script, []byte("#!/usr/bin/env python3\nprint('hi')\n"), 0o755)
	other := filepath.Join(dir, "data")
	os.WriteFile(other, []byte("not a program"), 0o755)
	static, err := os.Executable() // a Go test binary: static unless cgo is in
	if err != nil {
		t.Fatal(err)
	}
	if err := runsInBareImage(dynamic); err == nil || !strings.Contains(err.Error(), "linked dynamically") || !strings.Contains(err.Error(), "ld-") {
		t.Errorf("a dynamic program: %v, want it named linked dynamically, with its loader", err)
	}
	if err := runsInBareImage(script); err == nil || !strings.Contains(err.Error(), "script for /usr/bin/env python3") {
		t.Errorf("a script: %v, want its interpreter named", err)
	}
	for _, p := range []string{other, filepath.Join(dir, "missing"), "/bin/true"} {
		if err := runsInBareImage(p); err != nil {
			t.Errorf("%s: %v, want nil", p, err)
		}
	}
	if f, err := elf.Open(static); err == nil {
		interp := false
		for _, prog := range f.Progs {
			interp = interp || prog.Type == elf.PT_INTERP
		}
		f.Close()
		if err := runsInBareImage(static); (err != nil) != interp {
			t.Errorf("the test binary (dynamic %t): %v", interp, err)
		}
	}
}

func TestBindMountsKeepsTheImagesFolders(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no bind mounts from Windows paths")
	}
	// A command right in /tmp is mounted alone: a whole-folder mount
	// would hide the container's own /tmp. One in a system folder is the
	// image's to provide.
	f, err := os.CreateTemp("/tmp", "mst-mount-test-")
	if err != nil {
		t.Skip("no /tmp here")
	}
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	for _, tc := range []struct {
		command string
		want    []string
	}{
		{"/bin/sh", nil},
		{f.Name(), []string{f.Name()}},
	} {
		hp := runner.HostPaths{Commands: []string{tc.command}}
		if diff := cmp.Diff(tc.want, bindMounts(hp, settings{mst: DefaultMST, workDir: DefaultWorkDir})); diff != "" {
			t.Errorf("bindMounts(%s) (-want +got):\n%s", tc.command, diff)
		}
	}
	if !within("/tmp/x", "/tmp") || within("/tmpx", "/tmp") || !within("/a", "/") {
		t.Error("within is wrong about /tmp/x, /tmpx or /a")
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	if got, want := containerName(containerSpec{run: "quick start-20261130", shard: 3, attempt: 1}), "mst-quick-start-20261130-3"; got != want {
		t.Errorf("containerName = %q, want %q", got, want)
	}
	if got, want := containerName(containerSpec{run: "r", shard: 0, attempt: 2}), "mst-r-0-a2"; got != want {
		t.Errorf("containerName of a second attempt = %q, want %q", got, want)
	}
	for version, want := range map[string]string{"1.2.0": "mst-worker:1.2.0", "2.0.0-rc.1+build.5": "mst-worker:2.0.0-rc.1-build.5", "": "mst-worker:v"} {
		if got := DefaultImage(version); got != want {
			t.Errorf("DefaultImage(%q) = %q, want %q", version, got, want)
		}
	}
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	got, err := parseSettings(map[string]string{"image": "acme/worker:3", "mounts": "false", "workdir": "/home/w/"})
	if err != nil {
		t.Fatal(err)
	}
	want := settings{image: "acme/worker:3", mst: DefaultMST, workDir: "/home/w", mounts: false}
	if got != want {
		t.Errorf("parseSettings = %+v, want %+v", got, want)
	}
	for _, bad := range []map[string]string{{"mst": "mst"}, {"workdir": "work"}, {"mounts": "maybe"}} {
		if _, err := parseSettings(bad); err == nil {
			t.Errorf("parseSettings(%v) = nil error, want one", bad)
		}
	}
}

func TestCheckStatic(t *testing.T) {
	t.Parallel()
	text := filepath.Join(t.TempDir(), "mst")
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	err := checkStatic(text, "amd64")
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build") {
		t.Errorf("checkStatic(a script) = %v, want an error saying how to build mst", err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	// /bin/sh is a dynamic executable on every Linux this runs on.
	if sh, err := filepath.EvalSymlinks("/bin/sh"); err == nil {
		if err := checkStatic(sh, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "dynamically") {
			t.Errorf("checkStatic(%s) = %v, want it found dynamic", sh, err)
		}
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other != "" {
		exe, _ := os.Executable()
		if err := checkStatic(exe, other); err == nil || !strings.Contains(err.Error(), "built for") {
			t.Errorf("checkStatic(this binary, %s) = %v, want an architecture error", other, err)
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out
}

func tarOf(t *testing.T, files map[string]string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	return &buf
}
