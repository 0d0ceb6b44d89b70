package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// mstModule is MST's own module path.
const mstModule = "github.com/mst-eval/mst"

// buildPlugin is one --with: a Go module whose root package has
// func Plugin() plugin.Plugin.
type buildPlugin struct {
	module, version, dir string
}

func parseWith(s string) (buildPlugin, error) {
	var b buildPlugin
	rest, dir, hasDir := strings.Cut(s, "=")
	b.module, b.version, _ = strings.Cut(rest, "@")
	if hasDir {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return b, err
		}
		b.dir = abs
	}
	switch {
	case b.module == "" || strings.ContainsAny(b.module, " \t"):
		return b, fmt.Errorf("--with %q: give a Go module path, as in --with example.com/acme/mst-plugin@v1.2.0 (or =DIR for a folder of its source)", s)
	case !hasDir && b.version == "":
		b.version = "latest"
	case hasDir && dir == "":
		return b, fmt.Errorf("--with %q: nothing after =; give the folder of the module's source", s)
	}
	return b, nil
}

func newBuildCmd(stdio Stdio) *cobra.Command {
	var (
		with   []string
		out    string
		mstDir string
	)
	cmd := &cobra.Command{
		Use:   "build --with MODULE[@VERSION][=DIR]...",
		Short: "Build an mst with Go plugins compiled in",
		Long: `Build an mst with Go plugins compiled in, as xcaddy builds Caddy with modules.
Each --with names a Go module whose root package has

  func Plugin() plugin.Plugin

(package github.com/mst-eval/mst/plugin). mst build writes a main package that
passes every plugin to mstcmd.Main, fetches the modules with the go command
(Go 1.26 must be on PATH, with access to the module proxy or the modules in
its cache), and builds it, stripped, at the version of this mst. The build
lists its plugins with mst plugins.

MODULE@VERSION takes a published version (default: latest); MODULE=DIR takes
the module's source from a folder (a plugin under development). A build from
MST's own source (a version ending in -dev) needs --mst-dir, the folder of
that source.`,
		Example: `  mst build --with example.com/acme/mst-cloud@v1.4.0 -o ./mst-acme
  mst build --with example.com/acme/mst-cloud=../mst-cloud --mst-dir ~/src/mst -o ./mst-acme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(with) == 0 {
				return withCode(ExitUsage, errors.New("give at least one --with MODULE[@VERSION][=DIR]"))
			}
			var plugins []buildPlugin
			for _, w := range with {
				p, err := parseWith(w)
				if err != nil {
					return withCode(ExitUsage, err)
				}
				plugins = append(plugins, p)
			}
			absOut, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			return buildMST(cmd, stdio, plugins, absOut, mstDir)
		},
	}
	cmd.Flags().StringArrayVar(&with, "with", nil, "a plugin module to compile in: MODULE[@VERSION] or MODULE=DIR (repeatable)")
	cmd.Flags().StringVarP(&out, "output", "o", "mst", "the file to write the new mst to")
	cmd.Flags().StringVar(&mstDir, "mst-dir", "", "the folder of MST's source to build against (default: this mst's published version)")
	return cmd
}

func buildMST(cmd *cobra.Command, stdio Stdio, plugins []buildPlugin, out, mstDir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("mst build needs the go command (Go 1.26 or later) on PATH: install Go from https://go.dev/dl/")
	}
	var gomod strings.Builder
	gomod.WriteString("module mst-custom-build\n\ngo 1.26\n\n")
	switch {
	case mstDir != "":
		abs, err := filepath.Abs(mstDir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(abs, "mstcmd")); err != nil {
			return withCode(ExitUsage, fmt.Errorf("--mst-dir %s: not a folder of MST's source (it has no mstcmd package)", mstDir))
		}
		fmt.Fprintf(&gomod, "require %s v0.0.0\nreplace %s => %s\n", mstModule, mstModule, abs)
	default:
		v := mstVersion()
		if v == "" {
			return withCode(ExitUsage, fmt.Errorf("this mst (%s) was built from source, not installed from a published version: give --mst-dir with the folder of its source", Version))
		}
		fmt.Fprintf(&gomod, "require %s %s\n", mstModule, v)
	}
	var imports, calls strings.Builder
	for i, p := range plugins {
		if p.dir != "" {
			fmt.Fprintf(&gomod, "require %s v0.0.0\nreplace %s => %s\n", p.module, p.module, p.dir)
		}
		fmt.Fprintf(&imports, "\tp%d %q\n", i, p.module)
		fmt.Fprintf(&calls, "p%d.Plugin(), ", i)
	}
	main := fmt.Sprintf("// Code written by mst build. DO NOT EDIT.\n\npackage main\n\nimport (\n\t\"github.com/mst-eval/mst/mstcmd\"\n%s)\n\nfunc main() { mstcmd.Main(%s) }\n", imports.String(), strings.TrimSuffix(calls.String(), ", "))
	dir, err := os.MkdirTemp("", "mst-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644); err != nil {
		return err
	}
	goCmd := func(args ...string) error {
		c := exec.CommandContext(cmd.Context(), goBin, args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		var stderr bytes.Buffer
		c.Stdout, c.Stderr = &stderr, &stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	for _, p := range plugins {
		if p.dir == "" {
			fmt.Fprintf(stdio.Err, "fetching %s@%s\n", p.module, p.version)
			if err := goCmd("get", p.module+"@"+p.version); err != nil {
				return err
			}
		}
	}
	if err := goCmd("mod", "tidy"); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Err, "building %s with %d plugin(s)\n", out, len(plugins))
	ldflags := "-s -w -X " + mstModule + "/internal/cli.Version=" + Version
	if err := goCmd("build", "-trimpath", "-ldflags", ldflags, "-o", out, "."); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "%s\n", out)
	return nil
}

// mstVersion is the module version this mst was built from, "" for a
// build from source.
func mstVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path == mstModule && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return ""
}
