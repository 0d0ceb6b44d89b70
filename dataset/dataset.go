// Package dataset reads the cases of an eval from JSONL, JSON, YAML and CSV
// files, and rejects what cannot run (blank inputs, duplicate ids) before
// any client or server opens.
package dataset

import "encoding/json"

// Case is one input of a dataset.
type Case struct {
	ID string `json:"id"`
	// Input is the prompt, exactly as the file gives it (never trimmed).
	Input string `json:"input"`
	// Expect are graders specific to this case, in the grader grammar; they
	// are applied in addition to the eval's graders.
	Expect []json.RawMessage `json:"expect,omitempty"`
	// Metadata is free-form data carried to transcripts and reports.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Source is "file:line" (or "file:row" for CSV) where the case was read.
	Source string `json:"source,omitempty"`
}
