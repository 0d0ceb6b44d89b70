package run_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/mst-eval/mst/transcript"
)

// splitIDClasses are kinds of case ids found in real datasets, for the
// split's tests and benchmarks.
var splitIDClasses = []string{"slug", "numbered", "uuid", "unicode", "long"}

var (
	splitWords = []string{"weather", "forecast", "rain", "snow", "wind", "oslo", "tokyo", "cairo", "lisbon", "today", "tomorrow",
		"weekend", "alerts", "convert", "celsius", "refund", "invoice", "billing", "login", "reset", "password", "search",
		"files", "read", "write", "list", "issue", "pull-request", "merge", "deploy", "rollback", "schema", "query", "join",
		"summary", "report", "calendar", "meeting", "email", "draft", "translate", "unknown", "off-topic", "edge", "empty"}
	splitUnicodeWords = []string{"météo", "zürich", "東京", "天気", "погода", "москва", "القاهرة", "🌧️", "naïve", "façade",
		"北京", "서울", "날씨", "ñandú", "kraków", "İstanbul", "ελλάδα", "दिल्ली", "❄", "ß"}
)

// splitIDs returns n distinct case ids of a class, the same for the same
// class, n and seed.
func splitIDs(class string, n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, uint64(len(class))))
	pick := func(words []string, k int) string {
		parts := make([]string, k)
		for i := range parts {
			parts[i] = words[r.IntN(len(words))]
		}
		return strings.Join(parts, "-")
	}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		var id string
		switch class {
		case "slug":
			id = pick(splitWords, 2+r.IntN(3))
			if r.IntN(3) == 0 {
				id += fmt.Sprintf("-%d", 1+r.IntN(9))
			}
		case "numbered":
			id = fmt.Sprintf("case-%04d", len(out)+1+int(seed%7)*n)
		case "uuid":
			var b [16]byte
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
			id = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		case "unicode":
			id = pick(splitUnicodeWords, 1+r.IntN(3)) + fmt.Sprintf("-%d", r.IntN(100))
		case "long":
			id = "datasets/" + pick(splitWords, 2) + "/" + pick(splitWords, 12+r.IntN(10)) + fmt.Sprintf("-%06d", r.IntN(1000000))
		default:
			panic("unknown id class " + class)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// splitKeys are the trial keys of cases, each under variants "a" and
// "b" with trials trials: case by case, as a plan orders them.
func splitKeys(cases []string, trials int) []transcript.Key {
	var out []transcript.Key
	for _, c := range cases {
		for _, v := range []string{"a", "b"} {
			for i := 1; i <= trials; i++ {
				out = append(out, transcript.Key{Case: c, Variant: v, Trial: i})
			}
		}
	}
	return out
}
