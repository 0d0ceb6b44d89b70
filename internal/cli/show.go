package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/engine/report"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

func newShowCmd(stdio Stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN VARIANT CASE [TRIAL]",
		Short: "Print one transcript of a stored run in readable form",
		Long: `Print one trial's transcript: how it ended, the servers and tools it was
offered, the prompt, every message and tool call with its arguments and
result, the answer, usage and timing, and its grade with each grader's
reason. TRIAL counts from 1 (default 1). Text from the transcript is printed
with control characters escaped, so it cannot move the cursor or change the
terminal. --json prints the transcript as stored.`,
		Example: `  mst show mst-results/quickstart/runs/quickstart-20261201-090000-aaaaaa clear forecast-oslo
  mst show RUN clear forecast-oslo 2 --json | jq .toolCalls`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := transcript.Key{Variant: args[1], Case: args[2], Trial: 1}
			if len(args) == 4 {
				n, err := strconv.Atoi(args[3])
				if err != nil || n < 1 {
					return withCode(ExitUsage, fmt.Errorf("TRIAL %q: write the trial's number, counting from 1", args[3]))
				}
				key.Trial = n
			}
			return showTrial(cmd.Context(), stdio, args[0], key, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the transcript as stored (kind mst.transcript)")
	return cmd
}

func showTrial(ctx context.Context, stdio Stdio, ref string, key transcript.Key, asJSON bool) error {
	st, err := openRun(ctx, stdio.parts().ResultStores(), ref, "", nil)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	t, err := st.ReadTranscript(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return withCode(ExitUsage, fmt.Errorf("%s has no transcript of %s: %s", st.Location(), key, trialsHint(ctx, st, key)))
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeIndentedJSON(stdio.Out, t)
	}
	var g *grade.TrialGrade
	err = st.Grades(ctx, func(tg grade.TrialGrade) error {
		if tg.Key == key {
			g = &tg
		}
		return nil
	})
	if err != nil {
		return err
	}
	return writeTranscript(stdio.Out, t, g)
}

// trialsHint says which trials of the variant and case the run has, or
// which variants and cases it has.
func trialsHint(ctx context.Context, st store.Run, key transcript.Key) string {
	keys, err := st.Keys(ctx)
	if err != nil {
		return "mst report RUN lists its variants and cases"
	}
	var trials []string
	variants, cases := map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		variants[k.Variant] = true
		cases[k.Case] = true
		if k.Variant == key.Variant && k.Case == key.Case {
			trials = append(trials, strconv.Itoa(k.Trial))
		}
	}
	switch {
	case len(trials) > 0:
		return "its trials of that case are " + strings.Join(trials, ", ")
	case !variants[key.Variant]:
		return fmt.Sprintf("no trial of variant %s was stored (mst report RUN lists the variants)", transcript.Printable(key.Variant))
	case !cases[key.Case]:
		return fmt.Sprintf("no trial of case %s was stored (mst report RUN lists the cases)", transcript.Printable(key.Case))
	}
	return "that trial is missing (mst run --resume RUN runs it)"
}

// writeTranscript prints t for a terminal. Every text from the
// transcript goes through transcript.Printable line by line, so its own
// line breaks are kept and nothing else reaches the terminal raw.
func writeTranscript(w io.Writer, t *transcript.Transcript, g *grade.TrialGrade) error {
	ew := &errorWriter{w: w}
	p := transcript.Printable
	fmt.Fprintf(ew, "Trial    %s (run %s)\n", t.Key, p(t.Run))
	client := p(t.Client.Name)
	if t.Client.Version != "" {
		client += " " + p(t.Client.Version)
	}
	fmt.Fprintf(ew, "Client   %s, model %s\n", client, p(orText(t.Model, "–")))
	outcome := p(t.Outcome.Status)
	if t.Outcome.Cause != "" {
		outcome += " (" + p(t.Outcome.Cause) + ")"
	}
	fmt.Fprintf(ew, "Outcome  %s after %s", outcome, showMillis(t.Timing.DurationMs))
	if t.Timing.SetupMs > 0 {
		fmt.Fprintf(ew, " (setup %s)", showMillis(t.Timing.SetupMs))
	}
	fmt.Fprintln(ew)
	if t.Outcome.Detail != "" {
		writeBlock(ew, "         ", t.Outcome.Detail)
	}
	fmt.Fprintf(ew, "Usage    %d input, %d output tokens; %d model calls\n", t.Usage.InputTokens, t.Usage.OutputTokens, t.Usage.ModelCalls)
	if t.Environment.Runner != "" {
		fmt.Fprintf(ew, "Ran on   %s (%s/%s), shard %d\n", p(t.Environment.Runner), p(t.Environment.OS), p(t.Environment.Arch), t.Shard)
	}
	for _, s := range t.Servers {
		line := fmt.Sprintf("Server   %s (%s): %s", p(s.Name), p(s.Transport), p(strings.Join(s.Tools, ", ")))
		if s.Implementation != "" {
			line += "; " + p(s.Implementation)
		}
		fmt.Fprintln(ew, line)
		fmt.Fprintf(ew, "         tools offered %s", shortHash(s.ToolsHash))
		if s.ServerToolsHash != "" {
			fmt.Fprintf(ew, ", server's own tools %s", shortHash(s.ServerToolsHash))
		}
		fmt.Fprintln(ew)
	}
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "Prompt:")
	writeBlock(ew, "  ", t.Prompt)
	calls := map[string]transcript.ToolCall{}
	for _, c := range t.ToolCalls {
		calls[c.ID] = c
	}
	for _, c := range t.ClientToolCalls {
		if _, ok := calls[c.ID]; !ok {
			calls[c.ID] = c
		}
	}
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "Messages:")
	shown := map[string]bool{}
	for _, m := range t.Messages {
		switch {
		case m.Role == "tool":
			fmt.Fprintf(ew, "  tool result for %s:\n", p(m.ToolCall))
			writeBlock(ew, "    ", m.Text)
		default:
			fmt.Fprintf(ew, "  %s:\n", p(m.Role))
			if m.Text != "" {
				writeBlock(ew, "    ", m.Text)
			}
		}
		for _, id := range m.ToolCalls {
			if c, ok := calls[id]; ok {
				writeCall(ew, c)
				shown[id] = true
			} else {
				fmt.Fprintf(ew, "    → call %s (not recorded)\n", p(id))
			}
		}
	}
	// Calls no message names (a client that reports calls apart).
	for _, c := range t.ToolCalls {
		if !shown[c.ID] {
			writeCall(ew, c)
		}
	}
	for _, d := range t.Discrepancies {
		fmt.Fprintf(ew, "  ! %s call %s of %s.%s: %s\n", p(d.Kind), p(d.Call), p(d.Server), p(d.Tool), p(d.Detail))
	}
	fmt.Fprintln(ew)
	if t.Answer != "" {
		fmt.Fprintln(ew, "Answer:")
		writeBlock(ew, "  ", t.Answer)
		fmt.Fprintln(ew)
	}
	switch {
	case g == nil:
		fmt.Fprintln(ew, "Grade:   not graded yet (mst report RUN grades it)")
	case !g.Graded && g.Errored != "":
		fmt.Fprintln(ew, "Grade:   not graded: a grader that decides the trial gave no verdict (mst grade RUN grades it again)")
		writeResults(ew, g)
	case !g.Graded:
		fmt.Fprintln(ew, "Grade:   not graded (the trial did not run to an end)")
	default:
		verdict := "failed"
		if g.Passed {
			verdict = "passed"
		}
		fmt.Fprintf(ew, "Grade:   %s\n", verdict)
		writeResults(ew, g)
		if g.Failed != "" {
			fmt.Fprintf(ew, "  %s %s\n", report.MarkFailed, p(g.Failed))
		}
	}
	return ew.err
}

// writeResults prints each grader's result on a line of its own, marked
// as report.ResultLine marks it: an advisory judge that did not pass the
// trial gets a mark of its own and the word advisory, never a cross, and a
// note says what that means.
func writeResults(w io.Writer, g *grade.TrialGrade) {
	for _, r := range g.Results {
		fmt.Fprintln(w, "  "+transcript.Printable(report.ResultLine(r)))
	}
	if report.HasAdvisory(g.Results) {
		fmt.Fprintln(w, "  ("+report.AdvisoryNote+")")
	}
}

// writeCall prints one tool call with its arguments and result.
func writeCall(w io.Writer, c transcript.ToolCall) {
	p := transcript.Printable
	name := p(c.Server) + "." + p(c.Tool)
	if c.OfferedAs != "" {
		name += " (offered as " + p(c.OfferedAs) + ")"
	}
	var tags []string
	if c.Simulated {
		tags = append(tags, "simulated")
	}
	if c.Injected != "" {
		tags = append(tags, "fault: "+p(c.Injected))
	}
	if c.Evidence != "" {
		tags = append(tags, "seen by "+p(c.Evidence))
	}
	line := fmt.Sprintf("    → call %s %s, %s", name, p(string(c.Arguments)), showMillis(c.DurationMs))
	if len(tags) > 0 {
		line += " [" + strings.Join(tags, ", ") + "]"
	}
	fmt.Fprintln(w, line)
	switch {
	case c.Error != "":
		fmt.Fprintln(w, "      call failed:")
		writeBlock(w, "        ", c.Error)
	case c.IsError:
		fmt.Fprintln(w, "      error result:")
		writeBlock(w, "        ", c.Result)
	default:
		fmt.Fprintln(w, "      result:")
		writeBlock(w, "        ", c.Result)
	}
}

// writeBlock prints text line by line under indent, each line escaped.
func writeBlock(w io.Writer, indent, text string) {
	if text == "" {
		fmt.Fprintf(w, "%s(empty)\n", indent)
		return
	}
	for line := range strings.Lines(strings.TrimRight(text, "\n")) {
		fmt.Fprintf(w, "%s%s\n", indent, transcript.Printable(strings.TrimSuffix(line, "\n")))
	}
}

func shortHash(h string) string {
	if h == "" {
		return "(not recorded)"
	}
	return transcript.Printable(h[:min(12, len(h))])
}

func showMillis(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

// errorWriter keeps the first write error.
type errorWriter struct {
	w   io.Writer
	err error
}

func (e *errorWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return len(b), nil
	}
	n, err := e.w.Write(b)
	if err != nil {
		e.err = err
	}
	return n, nil
}
