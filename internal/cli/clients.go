package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/internal/engine/report"
)

// emptyOptions is the options schema of a client that declares none: it
// takes no options.
const emptyOptions = `{"type":"object","additionalProperties":false}`

// clientInfo is one client as mst clients --json prints it.
type clientInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	OS          []string `json:"os"`
	Credentials []string `json:"credentials"`
	Setup       string   `json:"setup"`
	// Available says whether the client can run on the OS the command
	// looked at (this machine's, or --os); AvailableError says why not.
	Available      bool            `json:"available"`
	AvailableError string          `json:"availableError,omitempty"`
	Concurrent     bool            `json:"concurrent"`
	CaseOverrides  []string        `json:"caseOverrides"`
	Options        json.RawMessage `json:"options"`
}

func newClientsCmd(stdio Stdio) *cobra.Command {
	var (
		asJSON, markdown bool
		osFlag           string
	)
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "List the clients MST can run, with what each needs",
		Long: `List the clients: what each one is, the operating systems it runs on, the
credentials and setup it needs, and its clientOptions with their defaults.
A client that this build or this machine cannot run is marked, with the reason.

Defaults are shown as the clients declare them: a value, or in parentheses
what leaving the option out means. Nothing is filled in from your configs.`,
		Example: `  mst clients
  mst clients show claude-code
  mst clients --json | jq '.clients[] | select(.available) | .name'
  mst clients --markdown > docs/clients.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			goos, err := targetOS(osFlag)
			if err != nil {
				return err
			}
			reg := stdio.parts().Clients()
			switch {
			case markdown:
				_, err := stdio.Out.Write(ClientsMarkdown(reg))
				return err
			case asJSON:
				infos := make([]clientInfo, 0, len(reg.Names()))
				for _, name := range reg.Names() {
					d, _ := reg.Lookup(name)
					infos = append(infos, describeClient(reg, d, goos))
				}
				return writeList(stdio.Out, kindClients, "clients", infos)
			}
			return writeClientList(stdio.Out, reg, goos, termWidth(stdio, stdio.Out))
		},
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the clients as JSON, with each one's full options schema")
	cmd.PersistentFlags().StringVar(&osFlag, "os", "", "say what is available on this OS (linux, macos, windows) instead of this machine's")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the catalogue as Markdown, as docs/clients.md holds it")
	cmd.MarkFlagsMutuallyExclusive("json", "markdown")

	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print one client in detail: requirements, availability, options",
		Long: `Print one client in detail: what it is, the operating systems it runs on,
its credentials and setup, whether it can run here, how it runs trials, what a
case may override, and each option with its type, default and meaning.`,
		Example: `  mst clients show cowork
  mst clients show api --json | jq .options`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			goos, err := targetOS(osFlag)
			if err != nil {
				return err
			}
			reg := stdio.parts().Clients()
			d, err := reg.Lookup(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if asJSON {
				return writeIndentedJSON(stdio.Out, struct {
					envelope
					clientInfo
				}{envelope{kindClient, 1}, describeClient(reg, d, goos)})
			}
			return writeClientDetail(stdio.Out, reg, d, goos)
		},
	}
	cmd.AddCommand(show)
	return cmd
}

// targetOS turns the --os flag into a GOOS value; empty means this
// machine's.
func targetOS(flag string) (string, error) {
	switch flag {
	case "":
		return runtime.GOOS, nil
	case "macos", "darwin":
		return "darwin", nil
	case "linux", "windows":
		return flag, nil
	}
	return "", withCode(ExitUsage, fmt.Errorf("--os %q: unknown OS (known: linux, macos, windows)", flag))
}

// describeClient gathers what mst clients prints about d, with its
// availability on goos.
func describeClient(reg *client.Registry, d *client.Definition, goos string) clientInfo {
	info := clientInfo{
		Name:          d.Name,
		Description:   d.Description,
		OS:            clientOSNames(d.Requirements.OS),
		Credentials:   nonNilStrings(d.Requirements.Credentials),
		Setup:         d.Requirements.Setup,
		Available:     true,
		Concurrent:    d.Concurrent,
		CaseOverrides: nonNilStrings(d.CaseOverrides),
		Options:       d.Options,
	}
	if len(bytes.TrimSpace(info.Options)) == 0 {
		info.Options = json.RawMessage(emptyOptions)
	}
	if err := client.CheckOS(reg, d.Name, goos); err != nil {
		info.Available, info.AvailableError = false, err.Error()
	}
	return info
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeClientList prints the table of clients, each row followed by its
// options and, when it cannot run on goos, why, within width characters
// a line (0: no limit): on a narrow terminal the setup, credentials and OS
// columns are left out in that order and descriptions are shortened
// (mst clients show NAME has them in full).
func writeClientList(w io.Writer, reg *client.Registry, goos string, width int) error {
	var table bytes.Buffer
	tbl := report.Table{Columns: []report.Column{
		{Head: "NAME"}, {Head: "WHAT", Shrink: true}, {Head: "OS", Drop: 3},
		{Head: "CREDENTIALS", Drop: 2, Shrink: true}, {Head: "SETUP", Drop: 1, Shrink: true},
	}}
	var notes [][]string
	for _, name := range reg.Names() {
		d, _ := reg.Lookup(name)
		info := describeClient(reg, d, goos)
		// A cell holds no newline, so that the table has one line per client.
		oneLine := strings.NewReplacer("\n", " ", "\t", " ").Replace
		tbl.Rows = append(tbl.Rows, []string{oneLine(info.Name), oneLine(info.Description), strings.Join(info.OS, ", "),
			oneLine(orNoneText(strings.Join(info.Credentials, "; "))), oneLine(orNoneText(info.Setup))})
		opts, err := client.DescribeOptions(info.Options)
		if err != nil {
			return fmt.Errorf("client %s: %w", name, err)
		}
		var list []string
		for _, o := range opts {
			list = append(list, optionSummary(o))
		}
		lines := []string{"options: " + orNoneText(strings.Join(list, ", "))}
		if !info.Available {
			lines = append(lines, "not available here: "+info.AvailableError)
		}
		notes = append(notes, lines)
	}
	dropped := tbl.Write(&table, width)
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	var out strings.Builder
	out.WriteString(strings.TrimRight(rows[0], " ") + "\n")
	for i, row := range rows[1:] {
		out.WriteString(strings.TrimRight(row, " ") + "\n")
		for _, l := range notes[i] {
			out.WriteString(report.Wrap("    "+l, width, "      ") + "\n")
		}
	}
	if dropped > 0 {
		out.WriteString("\n" + report.Wrap(fmt.Sprintf("(OS, credentials and setup columns left out to fit %d columns.)", width), width, " "))
	}
	out.WriteString("\n" + report.Wrap("`mst clients show NAME` prints one client's options in full.", width, "  ") + "\n")
	_, err := io.WriteString(w, out.String())
	return err
}

// writeClientDetail prints one client as mst clients show does.
func writeClientDetail(w io.Writer, reg *client.Registry, d *client.Definition, goos string) error {
	info := describeClient(reg, d, goos)
	opts, err := client.DescribeOptions(info.Options)
	if err != nil {
		return fmt.Errorf("client %s: %w", d.Name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", info.Name, info.Description)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "OS:\t%s\n", strings.Join(info.OS, ", "))
	for i, c := range orNoneLines(info.Credentials) {
		label := ""
		if i == 0 {
			label = "Credentials:"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, c)
	}
	fmt.Fprintf(tw, "Setup:\t%s\n", orNoneText(info.Setup))
	if info.Available {
		fmt.Fprintf(tw, "Available on %s:\tyes\n", client.OSName(goos))
	} else {
		fmt.Fprintf(tw, "Available on %s:\tno: %s\n", client.OSName(goos), info.AvailableError)
	}
	fmt.Fprintf(tw, "Trials:\t%s\n", trialsText(info.Concurrent))
	fmt.Fprintf(tw, "A case may set:\t%s\n", caseOverridesText(info.CaseOverrides))
	tw.Flush()
	b.WriteString("\nclientOptions:\n")
	if len(opts) == 0 {
		b.WriteString("  none: this client takes no options\n")
	} else {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  OPTION\tTYPE\tDEFAULT\tDESCRIPTION")
		for _, o := range opts {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Name, optionType(o.Schema), optionDefault(o), o.Description)
		}
		tw.Flush()
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// ClientsMarkdown renders the clients of reg as the Markdown of
// docs/clients.md: a summary table, then a section per client with its
// requirements, availability on each OS it runs on, and options table. The
// output depends only on the definitions, not on this machine.
func ClientsMarkdown(reg *client.Registry) []byte {
	var b strings.Builder
	b.WriteString("# Clients\n\n")
	b.WriteString("<!-- Generated from the client definitions; do not edit. Regenerate with\n")
	b.WriteString("     go run ./cmd/mst clients --markdown > docs/clients.md -->\n\n")
	b.WriteString("A client is the product that answers a variant's cases: the model alone\n")
	b.WriteString("through its API, a coding CLI, or a desktop app. A variant names one with\n")
	b.WriteString("`client:` and tunes it with `clientOptions:`, which MST checks against the\n")
	b.WriteString("client's options schema when the eval loads. `mst clients` prints this\n")
	b.WriteString("catalogue for the build you have, and `mst clients show NAME --json` gives a\n")
	b.WriteString("client's full options schema.\n\n")
	b.WriteString("A default in `code` is the value used when the option is left out; one in\n")
	b.WriteString("plain words says what leaving it out means.\n\n")
	b.WriteString("| Client | What it is | OS | Credentials | Setup |\n|---|---|---|---|---|\n")
	names := reg.Names()
	for _, name := range names {
		d, _ := reg.Lookup(name)
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s | %s |\n", d.Name, mdAnchor(d.Name), mdTableCell(d.Description),
			strings.Join(clientOSNames(d.Requirements.OS), ", "), mdTableCell(orNoneText(strings.Join(d.Requirements.Credentials, "; "))), mdSetupCell(d.Requirements.Setup))
	}
	for _, name := range names {
		d, _ := reg.Lookup(name)
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", d.Name, d.Description)
		fmt.Fprintf(&b, "- **OS:** %s\n", strings.Join(clientOSNames(d.Requirements.OS), ", "))
		fmt.Fprintf(&b, "- **Credentials:** %s\n", orNoneText(strings.Join(d.Requirements.Credentials, "; ")))
		fmt.Fprintf(&b, "- **Setup:** %s\n", mdSetupCell(d.Requirements.Setup))
		fmt.Fprintf(&b, "- **Trials:** %s\n", trialsText(d.Concurrent))
		fmt.Fprintf(&b, "- **A case may set:** %s\n", caseOverridesText(d.CaseOverrides))
		b.WriteString("- **Availability in this version:**")
		if d.Available == nil {
			b.WriteString(" yes, on every OS above\n")
		} else {
			b.WriteString("\n")
			for _, goos := range d.Requirements.OS {
				if err := d.Available(goos); err != nil {
					fmt.Fprintf(&b, "  - %s: no: %s\n", client.OSName(goos), err)
				} else {
					fmt.Fprintf(&b, "  - %s: yes\n", client.OSName(goos))
				}
			}
		}
		opts, err := client.DescribeOptions(d.Options)
		if err != nil {
			fmt.Fprintf(&b, "\nIts options schema cannot be read: %v\n", err)
			continue
		}
		if len(opts) == 0 {
			b.WriteString("\nIt takes no options.\n")
			continue
		}
		b.WriteString("\n| Option | Type | Default | Description |\n|---|---|---|---|\n")
		for _, o := range opts {
			def := o.DefaultDescription
			if o.Default != nil {
				def = "`" + defaultLiteral(o.Default) + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", o.Name, mdTableCell(optionType(o.Schema)), mdTableCell(def), mdTableCell(o.Description))
		}
	}
	return []byte(b.String())
}

// optionSummary is one option in the list's options line: name=value for
// a literal default, name (meaning) for a described one.
func optionSummary(o client.Option) string {
	switch {
	case o.Default != nil:
		return o.Name + "=" + defaultLiteral(o.Default)
	case o.DefaultDescription != "":
		return o.Name + " (" + o.DefaultDescription + ")"
	}
	return o.Name
}

// optionDefault is an option's default as mst clients show prints it: the
// value, or in parentheses what leaving the option out means.
func optionDefault(o client.Option) string {
	switch {
	case o.Default != nil:
		return defaultLiteral(o.Default)
	case o.DefaultDescription != "":
		return "(" + o.DefaultDescription + ")"
	}
	return "-"
}

// literal prints a default value: a string as it is, anything else as JSON.
func defaultLiteral(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// optionType describes the values an option's schema accepts, in a few
// words: "minimal | low | medium | high", "integer ≥ 1", "URL".
func optionType(s map[string]any) string {
	if enum, ok := s["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, v := range enum {
			vals[i] = defaultLiteral(v)
		}
		return strings.Join(vals, " | ")
	}
	var typ string
	switch t := s["type"].(type) {
	case string:
		typ = t
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, defaultLiteral(x))
		}
		typ = strings.Join(ts, " or ")
	default:
		typ = "any"
	}
	switch typ {
	case "integer", "number":
		min, hasMin := s["minimum"]
		max, hasMax := s["maximum"]
		switch {
		case hasMin && hasMax:
			return fmt.Sprintf("%s %s–%s", typ, defaultLiteral(min), defaultLiteral(max))
		case hasMin:
			return fmt.Sprintf("%s ≥ %s", typ, defaultLiteral(min))
		case hasMax:
			return fmt.Sprintf("%s ≤ %s", typ, defaultLiteral(max))
		}
	case "string":
		if s["format"] == "uri" {
			return "URL"
		}
		if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
			vals := make([]string, len(ex))
			for i, v := range ex {
				vals[i] = defaultLiteral(v)
			}
			return "string, e.g. " + strings.Join(vals, ", ")
		}
	}
	return typ
}

func clientOSNames(oses []string) []string {
	out := make([]string, len(oses))
	for i, o := range oses {
		out[i] = client.OSName(o)
	}
	return out
}

func trialsText(concurrent bool) string {
	if concurrent {
		return "several at once in one session"
	}
	return "one at a time in one session"
}

func caseOverridesText(list []string) string {
	if len(list) == 0 {
		return "nothing: every case runs on the variant's model and options"
	}
	return strings.Join(list, ", ")
}

func nonNilStrings(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

func orNoneText(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orNoneLines(list []string) []string {
	if len(list) == 0 {
		return []string{"none"}
	}
	return list
}

// mdCell escapes text for a Markdown table cell.
func mdTableCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// mdSetup renders a setup instruction: a command (it starts with a
// lowercase word, like npm) as code, a sentence as it is.
func mdSetupCell(s string) string {
	if s == "" {
		return "none"
	}
	if first := []rune(s)[0]; unicode.IsLower(first) {
		return "`" + s + "`"
	}
	return mdTableCell(s)
}

// anchor is the heading anchor GitHub gives a section named name.
func mdAnchor(name string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
			return r
		}
		if r == ' ' {
			return '-'
		}
		return -1
	}, name))
}
