// Package offline is MST's built-in offline model: a provider.Provider that
// needs no network and no key, gives the same answer to the same request
// every time, and answers in microseconds. The quickstart runs on it, and
// tests use it wherever a model has to pick a tool without a real provider.
//
// It is not a language model. It plays a simple, documented game, so that a
// result obtained with it can be explained by reading this comment. Build it
// with New("offline") or New("offline/<anything>"); the part after the slash
// is only a label. A value is safe for use by many goroutines at once: it
// keeps no state between calls.
//
// # Which turn it is
//
// When the last user message of the request carries tool results, the model
// writes its final answer from them (see "Answering from tool results").
// Otherwise it reads the prompt, which is the text of the last user message
// that has text (for an MST case: the case input), and either calls one tool
// or answers directly. The system prompt is ignored. Because the answer to
// tool results is always text, the model makes at most one tool call per
// prompt, so a client's maxActions limit rarely matters for it, and a case
// that needs two tool calls (comparing two cities, say) always fails with it.
//
// # Choosing a tool
//
// The prompt and each offered tool are turned into sets of words:
//
//   - Text is split into words at every character that is not a letter or a
//     digit (so "_", "-", ".", spaces and punctuation all separate words),
//     and camelCase words are split too ("getForecast" gives "get" and
//     "forecast").
//   - Words are lowercased. Words of one character, words made only of
//     digits, and stop words are dropped. The stop words are a fixed list of
//     about 120 English function words (articles, pronouns, auxiliary
//     verbs, prepositions, question words) plus a few words that carry no
//     subject in a request, such as "please", "tell", "show", "get" and
//     "give"; see isStopWord.
//   - Each remaining word is stemmed once, in two steps. First a plural
//     ending: "ies" becomes "y" ("cities" → "city"); "es" after s, x, z, ch
//     or sh is removed ("watches" → "watch"); otherwise a final "s" is
//     removed unless it follows s, u or i ("alerts" → "alert", but
//     "celsius" stays). Then a verb ending: "ing" or "ed" is removed when
//     what is left has at least three letters including a vowel and, for
//     "ed", does not end in "e" ("warnings" → "warning" → "warn",
//     "converted" → "convert", "speed" stays).
//
// A tool's words come from its name and its description; its input schema
// is not read for this. A tool's score is the number of distinct prompt
// words found among its words. The tool with the highest score is called;
// when several share it, the one offered first wins. When no tool scores at
// least 1, or no tools are offered, the model answers "I don't have a tool
// for that." without calling anything.
//
// This is why tool descriptions matter to it: a tool whose name and
// description share no word with the way users ask for it is never chosen.
//
// # Filling the arguments
//
// The arguments are built from the tool's input schema, one property at a
// time in the order the schema lists them. A required property always gets
// a value; an optional one only when the prompt supplies one (described per
// type below). Each value taken from the prompt is used for one property
// only, as long as another candidate is left.
//
//   - A property with an enum gets the unused enum value that appears
//     earliest in the prompt (compared as stemmed, lowercased words, so
//     "Celsius" matches "celsius"). When none appears, a required property
//     gets the first enum value and an optional one is left out.
//   - An integer or number property gets the first number in the prompt not
//     used yet ("-3", "30", "2.5"); an integer property drops any fraction.
//     A required one with no number left gets 0.
//   - A boolean property gets false when required and is otherwise left out.
//   - A string property (or one with no type) gets, in order of preference:
//     a span in double or single quotes; else a capitalised word of two
//     letters or more that does not start a sentence and is not a stop word,
//     together with the capitalised words right after it ("New York",
//     "North Sea"); else, for a required property only, the last word of the
//     prompt that is not a stop word, a number or a single letter. A
//     trailing "'s" is removed from a word ("Oslo's" gives "Oslo").
//   - A required object gets {} and a required array gets [].
//
// A tool whose input schema cannot be read is called with {}. Tool call ids
// are "offline_call_<n>", where n counts the assistant turns so far plus one.
//
// # Answering from tool results
//
// If any result in the last user message is an error, the answer is
// "The tool reported an error: " followed by the first error's content.
// Otherwise it is the content of all results joined by newlines ("The tool
// returned no content." when that is empty). The answer is cut to 2,000
// characters (runes).
//
// # Judging
//
// A request whose system prompt has "mst-judge/1" (JudgeMarker) in its
// first line is a judge's (package grade writes them). The offline model
// then does not pick a tool: it grades, by a rule that reads words and
// not the rubric, so a judge can be tried without a key. It reads the
// last user message's sections: <scale min="A" max="B"> (1 to 5 when
// missing), <reference>, <task>, <answer> and <tool_calls>, each up to
// its closing tag.
//
//   - The target is the reference when there is one, else the task.
//   - The material is the answer and the tool calls (with their results),
//     whichever of the two the judge sent.
//   - Both are cut into words as for tool choice, except that a run of
//     digits is kept ("12", "2026") and camelCase is not split; each word
//     counts once.
//   - The share is the number of the target's words found among the
//     material's, divided by the number of the target's words (0 when the
//     target has none).
//   - The score is A + round(share × (B − A)), halves rounded up; the
//     verdict is "pass" when the share is at least one half, "fail"
//     otherwise; the rationale says how many words were found and lists
//     up to eight that were not.
//
// The answer is that JSON object alone, such as
// {"verdict":"pass","score":4,"rationale":"offline judge: 3 of the 4 words
// of the task are in what the trial shows; missing: weekend"}.
//
// # Usage and stop reasons
//
// Tokens are counted as words divided by 0.75, rounded: a word is a run of
// non-space characters. Input tokens count the system prompt, every message
// (text, tool call names and arguments, tool result contents) and every
// offered tool (name, description and schema); output tokens count the
// answer text or the tool call's name and arguments. The stop reason is
// "tool_use" for a tool call and "end_turn" for an answer.
package offline
