package storetest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// Secret is the value WriteSecrets plants, named SecretName. It holds
// characters that JSON, HTML and URLs escape around secretMark, which every
// form of it, escaped or not, holds.
const (
	SecretName = "MST_CANARY"
	Secret     = "sk-<&>/é " + secretMark + `+=?'`
	secretMark = "Zq7CANARYf3a9c"
)

// redacted is what a redacted Secret reads as.
const redacted = "[redacted:" + SecretName + "]"

// Redactor returns a Redactor that removes Secret.
func Redactor(t *testing.T) *secrets.Redactor {
	t.Helper()
	set := secrets.New()
	if err := set.Add(SecretName, Secret); err != nil {
		t.Fatal(err)
	}
	return secrets.NewRedactor(set)
}

// CheckNoSecret fails t when b holds Secret in any form; where says what b
// is (a file, a field).
func CheckNoSecret(t *testing.T, where string, b []byte) {
	t.Helper()
	if i := bytes.Index(b, []byte(secretMark)); i >= 0 {
		lo, hi := max(0, i-40), min(len(b), i+len(secretMark)+40)
		t.Errorf("%s holds the secret, unredacted: …%q…", where, b[lo:hi])
	}
}

// secretKeys are the trials WriteSecrets stores: written, then replaced.
var secretKeys = []transcript.Key{{Case: "c1", Variant: "v", Trial: 1}, {Case: "c2", Variant: "v", Trial: 1}}

// WriteSecrets writes Secret into everything r stores: the run record, the
// config, the cases, the graders, the transcripts (written and replaced)
// and the grades. r must redact with Redactor. It checks that the values it
// gives r still hold Secret after: a store redacts what it stores, not its
// caller's values.
func WriteSecrets(t *testing.T, r store.Run) {
	t.Helper()
	ctx := t.Context()
	rec := runRecord(r.ID(), 1)
	rec.Eval = "eval " + Secret
	rec.Note = "partial: " + Secret
	rec.Runner.Options = map[string]string{"token": Secret}
	rec.Runner.Machines[0].Error = "ssh: " + Secret
	if err := r.WriteRun(ctx, rec); err != nil {
		t.Fatalf("WriteRun = %v", err)
	}
	for _, name := range []string{"eval.yaml", "eval.json"} {
		if err := r.WriteConfig(ctx, name, []byte("env:\n  KEY: "+Secret+"\n")); err != nil {
			t.Fatalf("WriteConfig(%s) = %v", name, err)
		}
	}
	quoted, _ := json.Marshal(Secret)
	cases := []transcript.Case{{
		ID: "c1", Input: "use " + Secret,
		Expect:        []json.RawMessage{json.RawMessage(`{"answerContains": ` + string(quoted) + `}`)},
		ClientOptions: json.RawMessage(`{"apiKey": ` + string(quoted) + `}`),
		Metadata:      map[string]any{"key": Secret, "list": []any{Secret}},
	}}
	if err := r.WriteCases(ctx, cases); err != nil {
		t.Fatalf("WriteCases = %v", err)
	}
	if err := r.WriteGraders(ctx, []json.RawMessage{json.RawMessage(`{"answerMatches": ` + string(quoted) + `}`)}); err != nil {
		t.Fatalf("WriteGraders = %v", err)
	}
	for i, k := range secretKeys {
		tr := sampleTranscript(k, "the key is "+Secret)
		tr.Prompt = Secret
		tr.Messages[2].Text = Secret
		tr.ToolCalls[0].Arguments = json.RawMessage(`{"token":` + string(quoted) + `}`)
		tr.ToolCalls[0].Result = "ok " + Secret
		tr.Outcome.Detail = Secret
		tr.ClientTelemetry = map[string]any{"header": "Bearer " + Secret}
		write := r.WriteTranscript
		if i == 1 {
			if _, err := r.WriteTranscript(ctx, sampleTranscript(k, "first")); err != nil {
				t.Fatalf("WriteTranscript(%v) = %v", k, err)
			}
			write = r.ReplaceTranscript
		}
		if _, err := write(ctx, tr); err != nil {
			t.Fatalf("writing the transcript of %v = %v", k, err)
		}
		if tr.Prompt != Secret || string(tr.ToolCalls[0].Arguments) != `{"token":`+string(quoted)+`}` {
			t.Errorf("writing the transcript of %v redacted the caller's transcript; want it unchanged", k)
		}
	}
	g := sampleGrade(secretKeys[0], false, "answer was "+Secret)
	g.Results[0].Grader = "answerContains " + Secret
	if err := r.AppendGrades(ctx, g, sampleGrade(secretKeys[1], false, Secret)); err != nil {
		t.Fatalf("AppendGrades = %v", err)
	}
	if g.Results[1].Detail != "answer was "+Secret {
		t.Errorf("AppendGrades redacted the caller's grade; want it unchanged")
	}
}

// testRedaction reads back everything WriteSecrets wrote, through a run
// opened with no Redactor (reads return what was stored): Secret is
// nowhere, its redaction everywhere.
func testRedaction(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.Create(ctx, "secret-run", Redactor(t))
	if err != nil {
		t.Fatal(err)
	}
	WriteSecrets(t, r)
	o, err := s.Open(ctx, "secret-run", nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s = %v", what, err)
			return
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		CheckNoSecret(t, what, b.Bytes())
		if !bytes.Contains(b.Bytes(), []byte(redacted)) {
			t.Errorf("%s = %s, want the secret's redaction %s", what, b.Bytes(), redacted)
		}
	}
	rec, err := o.ReadRun(ctx)
	check("ReadRun", rec, err)
	cases, err := o.ReadCases(ctx)
	check("ReadCases", cases, err)
	graders, err := o.ReadGraders(ctx)
	check("ReadGraders", graders, err)
	for _, k := range secretKeys {
		tr, err := o.ReadTranscript(ctx, k)
		check("ReadTranscript("+k.String()+")", tr, err)
		if err == nil && tr.Key != k {
			t.Errorf("ReadTranscript(%v) = key %v; redaction must leave keys be", k, tr.Key)
		}
	}
	n := 0
	err = o.Transcripts(ctx, func(tr *transcript.Transcript) error {
		n++
		check("Transcripts: "+tr.Key.String(), tr, nil)
		return nil
	})
	if err != nil || n != len(secretKeys) {
		t.Errorf("Transcripts = %d transcripts, %v; want %d", n, err, len(secretKeys))
	}
	n = 0
	err = o.Grades(ctx, func(g transcript.TrialGrade) error {
		n++
		check("Grades: "+g.Key.String(), g, nil)
		return nil
	})
	if err != nil || n != len(secretKeys) {
		t.Errorf("Grades = %d grades, %v; want %d", n, err, len(secretKeys))
	}
}
