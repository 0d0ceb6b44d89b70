// Package caseids makes case ids of the kinds real datasets use (kebab
// slugs, numbered ids, UUIDs, words in many scripts, long path-like ids),
// for the tests and benchmarks that need realistic ids: how evenly a split
// spreads them over shards, and what a run costs with them. The same
// class, count and seed always give the same ids.
package caseids

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Classes are the kinds of ids Make knows, in a fixed order.
var Classes = []string{"slug", "numbered", "uuid", "unicode", "long"}

var (
	words = []string{"weather", "forecast", "rain", "snow", "wind", "oslo", "tokyo", "cairo", "lisbon", "today", "tomorrow",
		"weekend", "alerts", "convert", "celsius", "refund", "invoice", "billing", "login", "reset", "password", "search",
		"files", "read", "write", "list", "issue", "pull-request", "merge", "deploy", "rollback", "schema", "query", "join",
		"summary", "report", "calendar", "meeting", "email", "draft", "translate", "unknown", "off-topic", "edge", "empty"}
	unicodeWords = []string{"météo", "zürich", "東京", "天気", "погода", "москва", "القاهرة", "🌧️", "naïve", "façade",
		"北京", "서울", "날씨", "ñandú", "kraków", "İstanbul", "ελλάδα", "दिल्ली", "❄", "ß"}
)

// Known reports whether Make knows class.
func Known(class string) bool {
	return slices.Contains(Classes, class)
}

// Make returns n distinct case ids of a class (one of Classes; it panics
// on another), the same for the same class, n and seed:
//   - slug: 2–4 words joined by hyphens, a third of them with a digit;
//   - numbered: case-0001 and on (the seed shifts the start);
//   - uuid: random version 4 UUIDs;
//   - unicode: 1–3 words in eight scripts, emoji among them, and a number;
//   - long: 150–250 byte paths of words under datasets/.
func Make(class string, n int, seed uint64) []string {
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
			id = pick(words, 2+r.IntN(3))
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
			id = pick(unicodeWords, 1+r.IntN(3)) + fmt.Sprintf("-%d", r.IntN(100))
		case "long":
			id = "datasets/" + pick(words, 2) + "/" + pick(words, 12+r.IntN(10)) + fmt.Sprintf("-%06d", r.IntN(1000000))
		default:
			panic("caseids: unknown id class " + class)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
