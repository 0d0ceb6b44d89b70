// Package suggest finds what a mistyped name was probably meant to be, for
// errors that end in "(did you mean timeout?)".
package suggest

import (
	"slices"
	"strings"
)

// Closest returns the candidates that got was most likely meant to be: those
// within a small edit distance (a swap of two letters counts as one edit),
// or that start with got, or that got starts with. Case is ignored. The
// closest matches come first; several only when equally close.
func Closest(got string, candidates []string) []string {
	g := strings.ToLower(got)
	if g == "" {
		return nil
	}
	maxDist := min(2, max(1, len([]rune(g))/3))
	best, bestScore := []string(nil), 1<<30
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == g && c == got {
			continue
		}
		score := -1
		if d := editDistance(g, lc); d <= maxDist {
			score = d
		} else if len(g) >= 3 && (strings.HasPrefix(lc, g) || strings.HasPrefix(g, lc)) {
			score = maxDist + 1
		}
		switch {
		case score < 0:
		case score < bestScore:
			best, bestScore = []string{c}, score
		case score == bestScore:
			best = append(best, c)
		}
	}
	slices.Sort(best)
	return slices.Compact(best)
}

// DidYouMean formats Closest's answer as " (did you mean a or b?)", or ""
// when nothing is close.
func DidYouMean(got string, candidates []string) string {
	s := Closest(got, candidates)
	if len(s) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(s, " or ") + "?)"
}

// Hint is DidYouMean, or when nothing is close a list of what is known
// (" (known: a, b, c)") if the list is short enough to read.
func Hint(got string, candidates []string) string {
	if s := DidYouMean(got, candidates); s != "" {
		return s
	}
	if len(candidates) == 0 || len(candidates) > 15 {
		return ""
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	return " (known: " + strings.Join(sorted, ", ") + ")"
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
