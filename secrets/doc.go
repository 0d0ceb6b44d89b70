// Package secrets reads a secrets file and keeps every secret value out of
// what MST stores and prints.
//
// A secrets file holds one KEY=value per line. Blank lines and lines that
// start with # are skipped; a line may start with "export "; a value may be
// wrapped in one pair of single or double quotes, which are removed (nothing
// inside them is unescaped). Everything after the first = is the value, so a
// # there is part of it. A KEY is a shell variable name
// ([A-Za-z_][A-Za-z0-9_]*) and appears once.
//
// A Set holds the secrets: the values clients get (Env) and every value ever
// added, for redaction. Values MST hands out later (tokens) join the Set
// with Add; a value that Add replaces stays redacted.
//
// A Redactor replaces every occurrence of every value with
// [redacted:NAME]. It finds a value as written and in the forms it takes
// once encoded: JSON string escaping (as Go writes it, with and without HTML
// escaping, as JavaScript writes it, with non-ASCII as \u escapes as Python
// writes it, and escaped twice, for JSON inside a JSON string) and URL
// escaping. Occurrences that overlap are replaced as one, so no part of a
// longer value is left behind. Values shorter than MinLength bytes are
// refused, since replacing them would mangle ordinary text, and so are
// values with line breaks, which line-by-line redaction could split.
//
// Error messages of this package name the file, the line and the key, and
// never show a value.
package secrets
