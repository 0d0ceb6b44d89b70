package offline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/internal/provider"
)

// JudgeMarker, found in the first line of a request's system prompt, makes
// the offline model act as a judge (see "Judging" in the package
// documentation). It is the marker MST's judges (package grade) write.
const JudgeMarker = "mst-judge/1"

// isJudgeRequest reports whether the system prompt's first line holds
// JudgeMarker.
func isJudgeRequest(system string) bool {
	first, _, _ := strings.Cut(system, "\n")
	return strings.Contains(first, JudgeMarker)
}

// judgeReply is the JSON object the offline judge answers with.
type judgeReply struct {
	Verdict   string `json:"verdict"`
	Score     int    `json:"score"`
	Rationale string `json:"rationale"`
}

// judge grades the trial of the last user message as the package
// documentation describes.
func judge(req provider.Request) provider.Response {
	msg := promptText(req.Messages)
	min, max := 1, 5
	if lo, hi, ok := scaleOf(msg); ok {
		min, max = lo, hi
	}
	targetName, target := "reference", section(msg, "reference")
	if strings.TrimSpace(target) == "" {
		targetName, target = "task", section(msg, "task")
	}
	material := section(msg, "answer") + "\n" + section(msg, "tool_calls")
	want := judgeWords(target)
	have := map[string]bool{}
	for _, w := range judgeWords(material) {
		have[w] = true
	}
	var found, missing []string
	for _, w := range want {
		if have[w] {
			found = append(found, w)
		} else {
			missing = append(missing, w)
		}
	}
	share := 0.0
	if len(want) > 0 {
		share = float64(len(found)) / float64(len(want))
	}
	reply := judgeReply{
		Verdict: "fail",
		Score:   min + int(math.Floor(share*float64(max-min)+0.5)),
	}
	if share >= 0.5 {
		reply.Verdict = "pass"
	}
	reply.Rationale = fmt.Sprintf("offline judge: %d of the %d words of the %s are in what the trial shows", len(found), len(want), targetName)
	if len(missing) > 0 {
		reply.Rationale += "; missing: " + strings.Join(firstN(missing, 8), ", ")
	}
	b, _ := json.Marshal(reply)
	return provider.Response{Text: string(b), StopReason: StopEndTurn}
}

// section returns the text between <tag> and the next </tag> of msg, or ""
// when msg has no such section.
func section(msg, tag string) string {
	open, close := "<"+tag+">", "</"+tag+">"
	i := strings.Index(msg, open)
	if i < 0 {
		return ""
	}
	rest := msg[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// scaleOf reads <scale min="A" max="B">.
func scaleOf(msg string) (min, max int, ok bool) {
	i := strings.Index(msg, "<scale ")
	if i < 0 {
		return 0, 0, false
	}
	tag, _, found := strings.Cut(msg[i:], ">")
	if !found {
		return 0, 0, false
	}
	attr := func(name string) (int, bool) {
		_, v, ok := strings.Cut(tag, name+`="`)
		if !ok {
			return 0, false
		}
		v, _, ok = strings.Cut(v, `"`)
		n, err := strconv.Atoi(v)
		return n, ok && err == nil
	}
	lo, ok1 := attr("min")
	hi, ok2 := attr("max")
	if !ok1 || !ok2 || hi <= lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// judgeWords are the distinct words of s that count for the judge, in
// order: runs of letters and digits, lowercased; a run of digits is kept as
// it is, and any other run is dropped when it is one rune long or a stop
// word, and stemmed otherwise.
func judgeWords(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(run string) {
		w := run
		if !allDigits(run) {
			if utf8.RuneCountInString(run) < 2 {
				return
			}
			w = strings.ToLower(run)
			if isStopWord(w) {
				return
			}
			w = stem(w)
		}
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	start := -1
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			add(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		add(s[start:])
	}
	return out
}

func firstN(words []string, n int) []string {
	if len(words) > n {
		return append(words[:n:n], "…")
	}
	return words
}
