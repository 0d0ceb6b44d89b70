package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/builtin"
	"github.com/mst-eval/mst/plugin"
)

const kindPlugins = "mst.plugins"

// pluginInfo is one plugin as mst plugins shows it.
type pluginInfo struct {
	Namespace   string `json:"namespace"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Origin is "compiled in", or the program plugin's path.
	Origin string `json:"origin"`
	Module string `json:"module,omitempty"`
	// Kinds are the full names the plugin adds, by kind.
	Kinds map[string][]string `json:"kinds,omitempty"`
	// Problem says why the plugin was left out; its kinds are not there.
	Problem string `json:"problem,omitempty"`
}

func newPluginsCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List the plugins this mst has, with their versions and what they add",
		Long: `List the plugins of this mst: the Go plugins compiled into it (mst build
--with MODULE makes such a build) and the program plugins it finds on
MST_PLUGIN_PATH (executables named mst-plugin-NAMESPACE). For each: its
version, where it comes from, and the runners, clients, dataset sources,
graders and credential stores it adds, by their full names
(NAMESPACE/KIND/NAME), which is how eval configs and flags name them.

A plugin that cannot be used (a namespace taken twice, a program that does
not start or does not speak mst.plugin/v1) is listed with its problem, and
the command exits 1. docs/plugins/README.md says how to write one.`,
		Example: `  mst plugins
  MST_PLUGIN_PATH=$HOME/.local/mst-plugins mst plugins --json | jq '.plugins[].kinds'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			infos := describePlugins(cmd, stdio.parts())
			bad := 0
			for _, in := range infos {
				if in.Problem != "" {
					bad++
				}
			}
			var err error
			if asJSON {
				err = writeList(stdio.Out, kindPlugins, "plugins", infos)
			} else {
				writePlugins(stdio.Out, infos, envMap(stdio.Env)[plugin.SearchPathVar])
			}
			if err == nil && bad > 0 {
				err = fmt.Errorf("%d plugin(s) cannot be used; see their problem above", bad)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plugins as JSON")
	return cmd
}

// describePlugins lists every plugin, starting program plugins to learn
// what they add.
func describePlugins(cmd *cobra.Command, parts *builtin.Parts) []pluginInfo {
	loaded := parts.Plugins.Load(cmd.Context())
	problems, shadowed := parts.Plugins.Problems()
	var out []pluginInfo
	for _, p := range loaded {
		in := pluginInfo{Namespace: p.Namespace, Version: p.Version, Description: p.Description, Origin: "compiled in", Module: p.Module, Kinds: map[string][]string{}}
		if pr, ok := parts.Plugins.Program(p.Namespace); ok {
			in.Origin, in.Module = pr.Path, ""
		}
		add := func(kind, name string) {
			in.Kinds[kind] = append(in.Kinds[kind], plugin.FullName(p.Namespace, kind, name))
		}
		for _, d := range p.Runners {
			add(plugin.KindRunner, d.Name)
		}
		for _, d := range p.Clients {
			add(plugin.KindClient, d.Name)
		}
		for _, d := range p.DatasetSources {
			add(plugin.KindDataset, d.Name)
		}
		for _, d := range p.Graders {
			add(plugin.KindGrader, d.Name)
		}
		for _, d := range p.CredentialStores {
			add(plugin.KindCredentialStore, d.Name)
		}
		out = append(out, in)
	}
	for ns, err := range problems {
		in := pluginInfo{Namespace: ns, Problem: err.Error(), Origin: "compiled in"}
		if pr, ok := parts.Plugins.Program(ns); ok {
			in.Origin = pr.Path
		}
		out = append(out, in)
	}
	for _, path := range shadowed {
		out = append(out, pluginInfo{Namespace: strings.TrimPrefix(baseName(path), plugin.ProgramPrefix), Origin: path,
			Problem: "shadowed by a program of the same name in an earlier folder of " + plugin.SearchPathVar})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

func writePlugins(w io.Writer, infos []pluginInfo, searchPath string) {
	if len(infos) == 0 {
		fmt.Fprintln(w, "No plugins: this mst has only its built-in runners, clients and graders.")
		if searchPath == "" {
			fmt.Fprintln(w, "Program plugins are found on "+plugin.SearchPathVar+", which is not set; Go plugins are compiled in with mst build --with MODULE.")
		} else {
			fmt.Fprintf(w, "No program named %sNAMESPACE is in %s=%s.\n", plugin.ProgramPrefix, plugin.SearchPathVar, searchPath)
		}
		return
	}
	for i, in := range infos {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := in.Namespace
		if in.Version != "" {
			head += " " + in.Version
		}
		fmt.Fprintf(w, "%s  (%s)\n", head, in.Origin)
		if in.Description != "" {
			fmt.Fprintf(w, "  %s\n", in.Description)
		}
		if in.Module != "" {
			fmt.Fprintf(w, "  module: %s\n", in.Module)
		}
		if in.Problem != "" {
			fmt.Fprintf(w, "  problem: %s\n", in.Problem)
		}
		for _, kind := range plugin.Kinds() {
			for _, n := range in.Kinds[kind] {
				fmt.Fprintf(w, "  %-17s %s\n", kind, n)
			}
		}
	}
}
