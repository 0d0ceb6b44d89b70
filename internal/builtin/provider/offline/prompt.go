package offline

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// word is one word of the prompt as written, with what argument filling
// needs to know about it.
type word struct {
	text          string // as written, a trailing "'s" removed
	key           string // lowercased and stemmed, for enum matching
	sentenceStart bool   // first word of the prompt or of a sentence
	joined        bool   // only spaces separate it from the previous word
	number        bool   // text parses as a number
	stop          bool   // a stop word
}

// prompt is what argument filling reads from the user's text.
type prompt struct {
	words   []word
	numbers []float64 // the numbers of the prompt, in order
	strings []string  // string candidates in order of preference
	last    string    // the last word that is not a stop word, a number or one rune
}

// scanPrompt reads the words, numbers and string candidates of s.
func scanPrompt(s string) prompt {
	var p prompt
	p.words = scanWords(s)
	for _, w := range p.words {
		if w.number {
			n, _ := strconv.ParseFloat(w.text, 64)
			p.numbers = append(p.numbers, n)
		} else if !w.stop && utf8.RuneCountInString(w.text) > 1 {
			p.last = w.text
		}
	}
	p.strings = append(quotedSpans(s), capitalisedRuns(p.words)...)
	return p
}

// scanWords splits s into words: runs of letters and digits, keeping an
// apostrophe or hyphen between two letters ("don't", "north-east"), a point
// between two digits ("2.5") and a minus sign before a number that starts a
// word ("-3").
func scanWords(s string) []word {
	rs := []rune(s)
	var words []word
	sentenceStart, joined := true, false
	for i := 0; i < len(rs); {
		r := rs[i]
		startsNumber := r == '-' && i+1 < len(rs) && unicode.IsDigit(rs[i+1]) && (i == 0 || !isWordRune(rs[i-1]))
		if !isWordRune(r) && !startsNumber {
			switch {
			case r == '.' || r == '!' || r == '?' || r == '\n':
				sentenceStart = true
				joined = false
			case r != ' ' && r != '\t':
				joined = false
			}
			i++
			continue
		}
		start := i
		i++
		for i < len(rs) {
			switch {
			case isWordRune(rs[i]):
				i++
				continue
			case i+1 < len(rs) && (rs[i] == '\'' || rs[i] == '’' || rs[i] == '-') && unicode.IsLetter(rs[i-1]) && unicode.IsLetter(rs[i+1]):
				i += 2
				continue
			case i+1 < len(rs) && rs[i] == '.' && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]):
				i += 2
				continue
			}
			break
		}
		text := trimPossessive(string(rs[start:i]))
		lower := strings.ToLower(text)
		w := word{
			text:          text,
			key:           stem(lower),
			sentenceStart: sentenceStart,
			joined:        joined && len(words) > 0,
			number:        isNumber(text),
			stop:          isStopWord(lower),
		}
		words = append(words, w)
		sentenceStart, joined = false, true
	}
	return words
}

// isNumber reports whether a word is a decimal number such as "30", "-3" or
// "2.5" (and not "NaN" or "Inf", which strconv also accepts).
func isNumber(text string) bool {
	if text == "" || (text[0] != '-' && (text[0] < '0' || text[0] > '9')) {
		return false
	}
	_, err := strconv.ParseFloat(text, 64)
	return err == nil
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func trimPossessive(s string) string {
	for _, suffix := range []string{"'s", "’s"} {
		if len(s) > len(suffix) && strings.HasSuffix(s, suffix) {
			return s[:len(s)-len(suffix)]
		}
	}
	return s
}

// quotedSpans returns the non-empty spans of s in double quotes (straight
// or curly) or single quotes (straight or curly). A quote opens only at the
// start of s or after a rune that is not a letter or digit, and closes only
// at the end of s or before such a rune, so the apostrophe of "what's" is
// not a quote.
func quotedSpans(s string) []string {
	var spans []string
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		closer, ok := closingQuote(rs[i])
		if !ok || (i > 0 && isWordRune(rs[i-1])) {
			continue
		}
		for j := i + 1; j < len(rs); j++ {
			if rs[j] != closer || (j+1 < len(rs) && isWordRune(rs[j+1])) {
				continue
			}
			if span := strings.TrimSpace(string(rs[i+1 : j])); span != "" {
				spans = append(spans, span)
			}
			i = j
			break
		}
	}
	return spans
}

func closingQuote(r rune) (rune, bool) {
	switch r {
	case '"':
		return '"', true
	case '“':
		return '”', true
	case '\'':
		return '\'', true
	case '‘':
		return '’', true
	}
	return 0, false
}

// capitalisedRuns returns the runs of capitalised words that do not start a
// sentence: each run starts at a capitalised word of two runes or more that
// is neither a stop word nor the first word of a sentence, and goes on over
// the capitalised words that follow it separated only by spaces.
func capitalisedRuns(words []word) []string {
	var runs []string
	for i := 0; i < len(words); i++ {
		if !capitalised(words[i]) || words[i].sentenceStart {
			continue
		}
		j := i + 1
		for j < len(words) && words[j].joined && capitalised(words[j]) {
			j++
		}
		parts := make([]string, 0, j-i)
		for _, w := range words[i:j] {
			parts = append(parts, w.text)
		}
		runs = append(runs, strings.Join(parts, " "))
		i = j - 1
	}
	return runs
}

func capitalised(w word) bool {
	r, _ := utf8.DecodeRuneInString(w.text)
	return unicode.IsUpper(r) && utf8.RuneCountInString(w.text) > 1 && !w.stop
}
