package grade

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/transcript"
)

// answerContains passes when the answer contains a text.
type answerContains struct {
	text       string
	ignoreCase bool
	// folded matches text ignoring case; set when ignoreCase is.
	folded *regexp.Regexp
}

func (g answerContains) Name() string {
	if g.ignoreCase {
		return fmt.Sprintf("answerContains %s (ignoring case)", strconv.Quote(g.text))
	}
	return "answerContains " + strconv.Quote(g.text)
}

func (g answerContains) Grade(t *transcript.Transcript) Result {
	r := Result{Grader: g.Name()}
	if g.ignoreCase {
		r.Passed = g.folded.MatchString(t.Answer)
	} else {
		r.Passed = strings.Contains(t.Answer, g.text)
	}
	if !r.Passed {
		r.Detail = noAnswer(t)
		if r.Detail == "" {
			r.Detail = "answer does not contain " + strconv.Quote(g.text)
			if g.ignoreCase {
				r.Detail += ", even ignoring case"
			}
		}
	}
	return r
}

// answerMatches passes when the answer matches a regular expression.
type answerMatches struct {
	re *regexp.Regexp
}

func (g answerMatches) Name() string { return "answerMatches /" + g.re.String() + "/" }

func (g answerMatches) Grade(t *transcript.Transcript) Result {
	r := Result{Grader: g.Name(), Passed: g.re.MatchString(t.Answer)}
	if !r.Passed {
		r.Detail = noAnswer(t)
		if r.Detail == "" {
			r.Detail = "answer does not match /" + g.re.String() + "/"
		}
	}
	return r
}

// noAnswer explains a failed answer grader when there is no answer to read,
// and returns "" when there is one.
func noAnswer(t *transcript.Transcript) string {
	if t.Answer != "" {
		return ""
	}
	if t.Outcome.Status != transcript.Answered && t.Outcome.Status != "" {
		return "there is no answer (the trial ended " + t.Outcome.Status + ")"
	}
	return "the answer is empty"
}

// toolCalled passes when some call has the tool (on the server, if given)
// and arguments that contain args.
type toolCalled struct {
	tool, server string
	// args is nil when any arguments do.
	args map[string]any
}

func (g toolCalled) Name() string {
	s := "toolCalled " + g.tool
	if g.args != nil {
		s += formatValue(g.args)
	}
	if g.server != "" {
		s += " on " + g.server
	}
	return s
}

func (g toolCalled) Grade(t *transcript.Transcript) Result {
	r := Result{Grader: g.Name()}
	var named, onServer int
	var otherServers []string
	firstMismatch := ""
	for _, c := range t.ToolCalls {
		if c.Tool != g.tool {
			continue
		}
		named++
		if g.server != "" && c.Server != g.server {
			if !contains(otherServers, c.Server) {
				otherServers = append(otherServers, c.Server)
			}
			continue
		}
		onServer++
		if g.args == nil {
			r.Passed = true
			return r
		}
		ok, why := matchArguments(g.args, c.Arguments)
		if ok {
			r.Passed = true
			return r
		}
		if firstMismatch == "" {
			firstMismatch = why
		}
	}
	switch {
	case named == 0 && refused(t, g.tool) > 0:
		r.Detail = fmt.Sprintf("%s was called 0 times: the client asked for it %s, but no server got the call (see the trial's discrepancies)", g.tool, times(refused(t, g.tool)))
	case named == 0:
		r.Detail = g.tool + " was called 0 times"
	case onServer == 0:
		r.Detail = fmt.Sprintf("%s was called %s, but never on server %s (only on %s)",
			g.tool, times(named), g.server, andList(serverNames(otherServers)))
	case onServer == 1:
		r.Detail = fmt.Sprintf("%s was called once, with other arguments: %s", g.tool, firstMismatch)
	default:
		r.Detail = fmt.Sprintf("%s was called %s, never with matching arguments (first call: %s)",
			g.tool, times(onServer), firstMismatch)
	}
	return r
}

// refused counts the calls of tool the client reports that never reached a
// server (unconfirmed discrepancies: a tool the variant hides, or one the
// client refused). Graders count only calls that reached a server (or a
// client's built-in tool): these are mentioned in details, never counted.
func refused(t *transcript.Transcript, tool string) int {
	n := 0
	for _, d := range t.Discrepancies {
		if d.Kind == transcript.Unconfirmed && d.Tool == tool {
			n++
		}
	}
	return n
}

// toolNotCalled passes when no call has the tool (on the server, if given).
// A call the client asked for that no server got does not count (it is
// named in the detail of a pass).
type toolNotCalled struct {
	tool, server string
}

func (g toolNotCalled) Name() string {
	if g.server != "" {
		return "toolNotCalled " + g.tool + " on " + g.server
	}
	return "toolNotCalled " + g.tool
}

func (g toolNotCalled) Grade(t *transcript.Transcript) Result {
	n := 0
	for _, c := range t.ToolCalls {
		if c.Tool == g.tool && (g.server == "" || c.Server == g.server) {
			n++
		}
	}
	r := Result{Grader: g.Name(), Passed: n == 0}
	if r.Passed {
		if k := refused(t, g.tool); k > 0 {
			r.Detail = fmt.Sprintf("%s was asked for %s, but no server got the call", g.tool, times(k))
		}
	}
	if !r.Passed {
		where := ""
		if g.server != "" {
			where = " on server " + g.server
		}
		r.Detail = fmt.Sprintf("%s was called %s%s", g.tool, times(n), where)
	}
	return r
}

// maxToolCalls passes when there are at most max tool calls, failed calls
// included.
type maxToolCalls struct {
	max int
}

func (g maxToolCalls) Name() string { return "maxToolCalls " + strconv.Itoa(g.max) }

func (g maxToolCalls) Grade(t *transcript.Transcript) Result {
	n := len(t.ToolCalls)
	r := Result{Grader: g.Name(), Passed: n <= g.max}
	if !r.Passed {
		r.Detail = fmt.Sprintf("%d tool calls, more than the limit of %d", n, g.max)
	}
	return r
}

// times says how many times, in words: "once", "2 times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

// serverNames labels servers for a message, naming an empty one.
func serverNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			out[i] = "no server"
		} else {
			out[i] = n
		}
	}
	return out
}
