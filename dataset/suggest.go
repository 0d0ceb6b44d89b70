package dataset

import (
	"slices"
	"strings"
)

// didYouMean returns " (did you mean x?)" naming the candidates closest to
// got — within a small edit distance, or sharing a prefix of three or more
// letters — or "" when none is close. Case is ignored.
func didYouMean(got string, candidates []string) string {
	g := strings.ToLower(got)
	if g == "" {
		return ""
	}
	maxDist := min(2, max(1, len([]rune(g))/3))
	var best []string
	bestScore := 1 << 30
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if c == got {
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
	if len(best) == 0 {
		return ""
	}
	slices.Sort(best)
	best = slices.Compact(best)
	best = best[:min(len(best), 5)]
	return " (did you mean " + strings.Join(best, " or ") + "?)"
}

// editDistance counts the insertions, deletions, substitutions and swaps of
// neighbours that turn a into b.
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
