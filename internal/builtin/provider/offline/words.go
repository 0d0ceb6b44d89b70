package offline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// contentWords appends to out the stemmed, lowercased content words of s,
// in the order they appear, duplicates included: s is split at every rune
// that is not a letter or digit and at camelCase boundaries; one-rune words,
// words made only of digits and stop words are dropped.
func contentWords(s string, out []string) []string {
	start := -1 // start of the current run of letters and digits
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = appendCamel(out, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = appendCamel(out, s[start:])
	}
	return out
}

// appendCamel splits a run of letters and digits at camelCase boundaries
// and appends its normalized words to out. A capital after a lowercase
// letter or digit starts a word ("getForecast"), and so does the last
// capital of a run of capitals followed by a lowercase letter ("HTTPServer"
// gives "HTTP" and "Server").
func appendCamel(out []string, run string) []string {
	start := 0
	var prev rune = -1
	for i, cur := range run {
		if prev >= 0 {
			boundary := unicode.IsUpper(cur) && (unicode.IsLower(prev) || unicode.IsDigit(prev))
			if !boundary && unicode.IsUpper(prev) && unicode.IsUpper(cur) {
				next, _ := utf8.DecodeRuneInString(run[i+utf8.RuneLen(cur):])
				boundary = unicode.IsLower(next)
			}
			if boundary {
				if w := normalize(run[start:i]); w != "" {
					out = append(out, w)
				}
				start = i
			}
		}
		prev = cur
	}
	if w := normalize(run[start:]); w != "" {
		out = append(out, w)
	}
	return out
}

// normalize lowercases and stems one word, and returns "" for a word that
// does not count: one rune long, only digits, or a stop word.
func normalize(w string) string {
	if utf8.RuneCountInString(w) < 2 || allDigits(w) {
		return ""
	}
	w = strings.ToLower(w)
	if isStopWord(w) {
		return ""
	}
	return stem(w)
}

func allDigits(s string) bool {
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// stem removes one plural ending and then one verb ending from a lowercase
// word, as the package documentation describes.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		w = w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "es") && hasAnySuffix(w[:len(w)-2], "s", "x", "z", "ch", "sh"):
		w = w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !hasAnySuffix(w[:len(w)-1], "s", "u", "i"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && stemmable(w[:len(w)-3]):
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && stemmable(w[:len(w)-2]) && !strings.HasSuffix(w[:len(w)-2], "e"):
		w = w[:len(w)-2]
	}
	return w
}

// stemmable reports whether what is left after removing a verb ending is
// long enough to be a word: three letters or more, one of them a vowel.
func stemmable(rest string) bool {
	return len(rest) >= 3 && strings.ContainsAny(rest, "aeiouy")
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// isStopWord reports whether a lowercase word carries no subject: English
// function words and a few request verbs. The list is fixed; changing it
// changes which tools the offline model picks.
func isStopWord(w string) bool {
	switch w {
	case "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
		"any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below",
		"between", "both", "but", "by", "can", "could", "did", "didn", "do", "does", "doesn",
		"doing", "don", "during", "each", "for", "from", "get", "give", "had", "has", "have",
		"he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "isn", "it",
		"its", "just", "let", "like", "me", "more", "most", "much", "my", "no", "not", "of",
		"off", "on", "only", "or", "other", "our", "out", "over", "please", "she", "should",
		"show", "so", "some", "such", "tell", "than", "that", "the", "their", "them", "then",
		"there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
		"up", "us", "very", "want", "was", "we", "were", "what", "when", "where", "which",
		"while", "who", "whom", "why", "will", "with", "won", "would", "you", "your":
		return true
	}
	return false
}
