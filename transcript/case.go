package transcript

import "encoding/json"

// Case is one input of a dataset, as the run keeps it.
type Case struct {
	ID string `json:"id"`
	// Input is the prompt, exactly as the file gives it (never trimmed). It
	// is never empty or only whitespace.
	Input string `json:"input"`
	// Expect are graders specific to this case, in the grader grammar; they
	// are applied in addition to the eval's graders. Each is a JSON object;
	// the grade package checks what is inside.
	Expect []json.RawMessage `json:"expect,omitempty"`
	// Model, when set, replaces the variant's model for this case's trials.
	// Only clients whose definition lists "model" in CaseOverrides honour it;
	// the eval fails to load otherwise.
	Model string `json:"model,omitempty"`
	// ClientOptions, when set, are merged over the variant's clientOptions
	// for this case's trials (clients listing "clientOptions").
	ClientOptions json.RawMessage `json:"clientOptions,omitempty"`
	// Metadata is free-form data carried to transcripts and reports. Values
	// are JSON values; numbers are json.Number, so that a file in any format
	// gives the same values. CSV metadata values are strings.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Source is "file:line" where the case starts (its line, its object, its
	// list item or its CSV record).
	Source string `json:"source,omitempty"`
}
