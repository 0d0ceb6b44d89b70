// Package dataset reads the cases of an eval from JSONL, JSON, YAML and CSV
// files, and rejects what cannot run (blank inputs, duplicate or missing
// ids, unknown keys) before any client or server opens.
//
// Loading reports every problem of every file, not just the first, as
// [Errors] in file and line order:
//
//	cases.jsonl:4: case "c4": input is blank
//
// A file is read within the bounds of package inputcheck: at most
// inputcheck.MaxDatasetBytes, UTF-8 text (a byte or an escape that is no
// character is refused with its line and column, never replaced), nesting
// and YAML alias expansion bounded. Syntax errors are told in MST's words.
//
// An input is kept exactly as the file gives it; it is never trimmed. The
// formats, chosen by the file's extension:
//
//   - .jsonl: one JSON object per line; blank lines are skipped.
//   - .json: an array of objects.
//   - .yaml, .yml: a list of objects.
//   - .csv: a header row naming the columns id and input, and optionally
//     expect.<grader> (a grader whose value is a string or, for
//     maxToolCalls, a whole number; an empty cell adds no grader) and
//     metadata.<key> (a metadata string; an empty cell adds nothing).
//
// Each format is also a dataset source definition ([Formats]), which the
// suite of plugin sources (dataset/datasettest) checks: a file given by
// its path is read by the definition of its extension's format.
//
// An object case has the keys id (a string, or a whole number that becomes
// its decimal string), input (a string, required), expect (a grader object
// or a list of them) and metadata (an object).
package dataset
