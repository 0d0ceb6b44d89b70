package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/engine/run"
	"github.com/mst-eval/mst/runner"
)

// newRunnerCmd is `mst runner`: list the runners, set one up, and clean up
// the machines runs left behind. Its hidden subcommands run inside worker
// containers.
func newRunnerCmd(stdio Stdio) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "List runners, set one up, and remove the machines runs left behind",
		Long: `A runner says where a run's trials run (mst run --runner NAME): in the mst
process (local), in child processes (processes), in containers (docker), and
more: mst runner list shows them all.

  mst runner list              the runners, with their --runner-option keys
  mst runner setup NAME        prepare a runner once, e.g. build the docker
                               runner's worker image
  mst runner cleanup RUN       remove the machines a run left behind (kept
                               with keep=failed or keep=always, or orphaned)`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRunnerListCmd(stdio), newRunnerSetupCmd(stdio), newRunnerCleanupCmd(stdio))
	cmd.AddCommand(newMachineCmds(stdio)...)
	return cmd
}

// runnerInfo is one runner as mst runner list --json prints it.
type runnerInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	OS          string          `json:"os,omitempty"`
	MaxShards   int             `json:"maxShards"`
	Setup       bool            `json:"setup"`
	Cleanup     bool            `json:"cleanup"`
	Options     json.RawMessage `json:"options"`
}

func newRunnerListCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the runners and their options",
		Long: `List the runners: what each does, the OS of its machines, how many shards it
runs at once, whether it needs mst runner setup, and its own --runner-option
keys. Every runner also takes MST's own options: shards=N (default 1, at most
the runner's maximum) and keep=never|failed|always (which machines outlive
their shard).`,
		Example: `  mst runner list
  mst runner list --json | jq '.runners[] | select(.name == "docker") | .options'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := stdio.parts().Runners()
			var infos []runnerInfo
			for _, name := range reg.Names() {
				d, _ := reg.Lookup(name)
				opts := d.Options
				if len(bytes.TrimSpace(opts)) == 0 {
					opts = json.RawMessage(emptyOptions)
				}
				infos = append(infos, runnerInfo{
					Name: d.Name, Description: d.Description, OS: d.OS, MaxShards: d.MaxShards,
					Setup: d.Setup != nil, Cleanup: d.Leftovers != nil, Options: opts,
				})
			}
			if asJSON {
				return writeList(stdio.Out, kindRunners, "runners", infos)
			}
			return writeRunnerList(stdio.Out, infos)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runners as JSON, with each one's options schema")
	return cmd
}

func writeRunnerList(w io.Writer, infos []runnerInfo) error {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOS\tSHARDS\tSETUP\tWHAT")
	for _, r := range infos {
		setup := "-"
		if r.Setup {
			setup = "mst runner setup " + r.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Name, orText(r.OS, "any"), r.MaxShards, setup, r.Description)
	}
	tw.Flush()
	fmt.Fprintln(&out)
	for _, r := range infos {
		opts, err := client.DescribeOptions(r.Options)
		if err != nil {
			return fmt.Errorf("runner %s: %w", r.Name, err)
		}
		fmt.Fprintf(&out, "%s options:", r.Name)
		if len(opts) == 0 {
			fmt.Fprintln(&out, " none of its own")
			continue
		}
		fmt.Fprintln(&out)
		for _, o := range opts {
			typ, _ := o.Schema["type"].(string)
			def := ""
			switch {
			case o.Default != nil:
				def = "; default " + defaultLiteral(o.Default)
			case o.DefaultDescription != "":
				def = "; default " + o.DefaultDescription
			}
			fmt.Fprintf(&out, "  %s (%s%s): %s\n", o.Name, typ, def, o.Description)
		}
	}
	fmt.Fprintln(&out, "\nEvery runner also takes shards=N and keep=never|failed|always.")
	_, err := w.Write(out.Bytes())
	return err
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func newRunnerSetupCmd(stdio Stdio) *cobra.Command {
	var (
		options []string
		mst     string
		with    []string
		verbose bool

		desktop                    bool
		desktopPackage, desktopApp string
	)
	cmd := &cobra.Command{
		Use:   "setup NAME",
		Short: "Prepare a runner once, such as building the docker runner's worker image",
		Long: `Prepare what a runner needs once per machine and MST version. For docker, that
is the worker image mst-worker:<version>, built locally from this mst binary
(or --mst PATH), which must be a static Linux build for the Docker host's
architecture:

  CGO_ENABLED=0 go build -o bin/ ./cmd/mst
  bin/mst runner setup docker

With --with LIST, the docker runner builds a Debian worker image instead,
with Node 22 and the npm MCP servers and CLI clients LIST names (such as
node,claude-code,codex-cli,gemini-cli,everything), tags it
mst-worker:<version>-… and prints the --runner-option image=… to run in it.

With --desktop (the same as --with desktop), it builds the desktop worker
image the desktop clients (cowork, chatgpt, codex-app) run in on Linux: a
display, a private D-Bus with the accessibility bus, an unlocked keyring, a
non-root desktop user and owned-desktop mode. The app itself cannot be in a
public image: --desktop-package PATH.deb installs it in an image of your own
built on top, and --desktop-app 'COMMAND' is how that image starts it
(docs/desktop.md).

With --runner-option image=REF, the docker runner builds nothing and checks
that the image holds a runnable mst.`,
		Example: `  mst runner setup docker
  mst runner setup docker --mst bin/linux-arm64/mst
  mst runner setup docker --with claude-code,everything
  mst runner setup docker --desktop --desktop-package claude-desktop.deb --desktop-app claude-desktop
  mst runner setup docker --runner-option image=registry.example/mst-cowork:1.4`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := stdio.parts().Runners().Lookup(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if desktop {
				with = append(with, "desktop")
			}
			if desktopPackage != "" || desktopApp != "" {
				if !desktop && !slices.Contains(with, "desktop") {
					return withCode(ExitUsage, fmt.Errorf("--desktop-package and --desktop-app add an app to the desktop worker image: add --desktop"))
				}
				if desktopPackage != "" {
					options = append(options, "desktopPackage="+desktopPackage)
				}
				if desktopApp != "" {
					options = append(options, "desktopApp="+desktopApp)
				}
			}
			chosen, err := run.ParseRunnerOptions(def, options, nil)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if def.Setup == nil {
				if len(with) > 0 {
					return withCode(ExitUsage, fmt.Errorf("--with: the %s runner builds no worker image; only the docker runner takes --with", def.Name))
				}
				fmt.Fprintf(stdio.Out, "the %s runner needs no setup\n", def.Name)
				return nil
			}
			if mst == "" {
				if mst, err = os.Executable(); err != nil {
					return fmt.Errorf("finding this mst binary: %w (pass --mst PATH)", err)
				}
			}
			// A runner's errors name the runner already.
			return def.Setup(cmd.Context(), runner.SetupParams{
				Options: chosen.Options, MST: mst, MSTVersion: Version, With: with, Logger: newLogger(stdio.Err, verbose), Out: stdio.Out,
			})
		},
	}
	cmd.Flags().StringArrayVar(&options, "runner-option", nil, "runner setting as key=value (repeat), as mst run takes them")
	cmd.Flags().StringVar(&mst, "mst", "", "the mst binary to put on the runner's machines (default: this one)")
	cmd.Flags().StringArrayVar(&with, "with", nil, "docker: build a Debian worker image with these parts, comma-separated (python, desktop, node, claude-code, codex-cli, gemini-cli, everything, filesystem; see docs/docker.md)")
	cmd.Flags().BoolVar(&desktop, "desktop", false, "docker: build the desktop worker image for the desktop clients (the same as --with desktop; docs/desktop.md)")
	cmd.Flags().StringVar(&desktopPackage, "desktop-package", "", "docker, with --desktop: a .deb of the desktop app to install in an image of your own on top")
	cmd.Flags().StringVar(&desktopApp, "desktop-app", "", "docker, with --desktop: the command that starts the app in that image (MST_DESKTOP_APP)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log details on stderr")
	return cmd
}

// leftoverInfo is one leftover machine as mst runner cleanup --json prints
// it.
type leftoverInfo struct {
	// Kind is "machine" (a runner's: a container, a pod, a shard folder)
	// or "folder" (one MST made on this machine: bundles, shard, work or
	// token folders of a process that died).
	Kind string `json:"kind"`
	// Runner is the runner that made a machine; "" for a folder.
	Runner string `json:"runner,omitempty"`
	runner.Leftover
	Removed bool   `json:"removed"`
	Error   string `json:"error,omitempty"`
}

func newRunnerCleanupCmd(stdio Stdio) *cobra.Command {
	var (
		runnerName string
		options    []string
		asJSON     bool
		all        bool
		verbose    bool
		results    string
	)
	cmd := &cobra.Command{
		Use:   "cleanup [RUN]",
		Short: "Remove the machines and folders a run left behind",
		Long: `Remove the machines (containers, pods, shard folders) a run left behind: those
kept with --runner-option keep=failed or keep=always, and those of a
coordinator that died. RUN is a run's folder or its id. A run folder also
says which runner it used; otherwise every runner that can leave machines is
asked, or only --runner NAME.

Cleanup also removes the folders MST processes of this machine made and left
when they died: the coordinator's bundles (mst-bundles-*), the processes
runner's shard folders (mst-shards-*), work folders (mst-work-*,
mst-worker-*), fetched files (mst-fetch-*) and workers' token folders
(mst-tokens-* in /dev/shm or $XDG_RUNTIME_DIR, /run/mst/tokens). Each such
folder holds a .mst-owner file naming its run and the process that made it;
a folder whose process still runs is never listed, so a live run keeps its
folders. Folders that name no run (token folders) go with --all.

Without RUN, cleanup lists the machines and folders of every run and removes
them only with --all: a run still going would lose its machines.

With --json, each entry has kind ("machine" or "folder"), runner (for a
machine), id (the machine, or the folder's path), run, shard (-1 for a
folder), detail, removed and error.`,
		Example: `  mst runner cleanup mst-results/quickstart/runs/quickstart-20261130-101500-a1b2c3
  mst runner cleanup quickstart-20261130-101500-a1b2c3 --runner docker
  mst runner cleanup            # list what every run left
  mst runner cleanup --all      # and remove it`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			runID := ""
			if len(args) == 1 {
				runID = args[0]
				// A stored run (its folder, its id in --results, its URL)
				// names its run and its runner.
				if st, err := openRun(ctx, stdio.parts().ResultStores(), args[0], results, nil); err == nil {
					rec, err := st.ReadRun(ctx)
					if err != nil {
						return err
					}
					runID = rec.ID
					if runnerName == "" {
						runnerName = rec.Runner.Name
						// The run's own options say where its machines
						// and folders are (the processes runner's dir).
						if len(options) == 0 {
							for _, k := range slices.Sorted(maps.Keys(rec.Runner.Options)) {
								options = append(options, k+"="+rec.Runner.Options[k])
							}
						}
					}
				}
			} else if len(options) > 0 && runnerName == "" {
				return withCode(ExitUsage, errors.New("--runner-option needs --runner NAME"))
			}
			reg := stdio.parts().Runners()
			var defs []*runner.Definition
			if runnerName != "" {
				d, err := reg.Lookup(runnerName)
				if err != nil {
					return withCode(ExitUsage, fmt.Errorf("--runner: %w", err))
				}
				defs = append(defs, d)
			} else {
				for _, n := range reg.Names() {
					d, _ := reg.Lookup(n)
					defs = append(defs, d)
				}
			}
			remove := runID != "" || all
			var (
				found    []leftoverInfo
				errs     []error
				notAsked []string
			)
			for _, d := range defs {
				if d.Leftovers == nil {
					continue
				}
				opts := map[string]string{}
				if runnerName != "" {
					chosen, err := run.ParseRunnerOptions(d, options, nil)
					if err != nil {
						return withCode(ExitUsage, err)
					}
					opts = chosen.Options
				}
				list, err := d.Leftovers(ctx, opts, runID)
				if err != nil {
					// A runner that cannot be asked (no Docker here) is
					// only an error when it was named.
					if runnerName != "" {
						return err
					}
					if verbose {
						fmt.Fprintf(stdio.Err, "mst: could not ask the %s runner for machines: %v\n", d.Name, err)
					}
					notAsked = append(notAsked, d.Name)
					continue
				}
				for _, l := range list {
					info := leftoverInfo{Kind: "machine", Runner: d.Name, Leftover: l}
					if remove {
						if err := d.Remove(ctx, opts, l); err != nil {
							info.Error = err.Error()
							errs = append(errs, err)
						} else {
							info.Removed = true
						}
					}
					found = append(found, info)
				}
			}
			// The folders MST processes of this machine left when they
			// died, whichever runner they used.
			folders, err := runner.FolderLeftovers(ctx, runID)
			if err != nil {
				return err
			}
			for _, l := range folders {
				info := leftoverInfo{Kind: "folder", Leftover: l}
				if remove {
					if err := runner.RemoveFolder(ctx, l); err != nil {
						info.Error = err.Error()
						errs = append(errs, err)
					} else {
						info.Removed = true
					}
				}
				found = append(found, info)
			}
			if asJSON {
				if found == nil {
					found = []leftoverInfo{}
				}
				if err := writeList(stdio.Out, kindLeftovers, "leftovers", found); err != nil {
					return err
				}
			} else {
				writeLeftovers(stdio.Out, found, runID, remove)
			}
			if len(notAsked) > 0 && !verbose {
				fmt.Fprintf(stdio.Err, "mst: could not ask: %s (-v says why; --runner NAME asks one)\n", strings.Join(notAsked, ", "))
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&runnerName, "runner", "", "ask only this runner (default: the stored run's, else every runner)")
	cmd.Flags().StringVar(&results, "results", "", "where runs are kept, to find RUN by id (a folder, gs://… or s3://…; default ./mst-results)")
	cmd.Flags().StringArrayVar(&options, "runner-option", nil, "runner setting as key=value (repeat), with --runner")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was found (and removed) as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "without RUN, remove the machines of every run")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "say why a runner could not be asked")
	return cmd
}

func writeLeftovers(w io.Writer, found []leftoverInfo, runID string, removed bool) {
	if len(found) == 0 {
		if runID != "" {
			fmt.Fprintf(w, "run %s left no machine behind\n", runID)
		} else {
			fmt.Fprintln(w, "no run left a machine behind")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNER\tMACHINE\tRUN\tSHARD\tSTATE")
	for _, f := range found {
		state := f.Detail
		switch {
		case f.Removed:
			state = "removed"
		case f.Error != "":
			state = "not removed: " + f.Error
		}
		name, shard := f.Runner, strconv.Itoa(f.Shard)
		if f.Kind == "folder" {
			name, shard = "(folder)", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, f.ID, orText(f.Run, "-"), shard, strings.ReplaceAll(state, "\n", " "))
	}
	tw.Flush()
	if !removed {
		fmt.Fprintln(w, "\nmst runner cleanup RUN removes one run's machines and folders; --all removes them all.")
	}
}

// newMachineCmds makes the hidden `mst runner NAME` commands that the
// runners run inside their machines (docker: idle, stop-exec), from what
// each runner declares. Runners that need the same command declare the
// same one; it is added once.
func newMachineCmds(stdio Stdio) []*cobra.Command {
	reg := stdio.parts().Runners()
	seen := map[string]bool{}
	var cmds []*cobra.Command
	lists := [][]runner.MachineCommand{runner.MachineRunnerCommands()}
	for _, name := range reg.Names() {
		d, _ := reg.Lookup(name)
		lists = append(lists, d.MachineCommands)
	}
	for _, list := range lists {
		for _, mc := range list {
			if seen[mc.Name] {
				continue
			}
			seen[mc.Name] = true
			use := mc.Name
			if mc.Usage != "" {
				use += " " + mc.Usage
			}
			cmds = append(cmds, &cobra.Command{
				Use:    use,
				Short:  mc.Short,
				Hidden: true,
				// The command parses its own flags.
				DisableFlagParsing: true,
				RunE: func(cmd *cobra.Command, args []string) error {
					return mc.Run(cmd.Context(), args, stdio.Out, stdio.Err)
				},
			})
		}
	}
	return cmds
}
