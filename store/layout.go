package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
	"github.com/mst-eval/mst/transcript"
)

// What every store shares: the names of a run's records relative to the
// run, how a transcript's key becomes a path, and the checks a stored
// record passes when read. The directory store keeps them as files of a
// run folder; a blob store (internal/builtin/store/blobstore) as objects under the run's
// prefix, so a run copied from one to the other reads the same.

// The names of a run's records, relative to the run.
const (
	RunRecordName     = runFile
	PrevRunRecordName = prevRunFile
	CasesName         = casesFile
	GradersName       = gradersFile
	TranscriptsName   = transcriptsDir
	GradeSetsName     = gradeSetsDir
)

// MaxRunRecordBytes bounds a stored run record: the largest MST reads.
const MaxRunRecordBytes = maxRunBytes

// ConfigName is the name under which a run keeps a copy of its config
// file, whose base name was name: eval.yaml, or eval.json for a JSON one.
func ConfigName(name string) string {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		return configBase + ".json"
	}
	return configBase + ".yaml"
}

// TranscriptPath is where a run keeps the transcript of k, as a
// slash-separated path relative to the run: transcripts/VARIANT/CASE.tN.json
// with names any file system and object store takes (see names.go).
func TranscriptPath(k transcript.Key) string { return transcriptPath(k) }

// TranscriptKey reads a key back from a path TranscriptPath gave. ok says
// rel is the path of k; cut says rel has the shape of a path whose names
// were cut to fit, so only the transcript it holds can say whose it is
// (ReadKey).
func TranscriptKey(rel string) (k transcript.Key, ok, cut bool) {
	under, found := strings.CutPrefix(rel, transcriptsDir+"/")
	if !found {
		return transcript.Key{}, false, false
	}
	return keyOf(under)
}

// SafeName is id as a name any file system and object store keeps apart
// from every other id: id itself when it is plain (lower-case letters,
// digits, "-", "_", "."), else escaped and marked with a hash of id.
func SafeName(id string) string { return fileName(id, "") }

// ReadKey reads only the key of a transcript, from its first bytes.
func ReadKey(rd io.Reader) (transcript.Key, error) { return decodeKey(rd) }

// DecodeTranscript decodes a stored transcript. One that is empty or does
// not decode (cut short) fails wrapping ErrDamaged and ErrNotFound: it
// counts as missing. where names it in the error.
func DecodeTranscript(b []byte, where string) (*transcript.Transcript, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &damagedError{where, fmt.Errorf("it is empty")}
	}
	t, err := transcript.Decode(b)
	if err != nil {
		return nil, &damagedError{where, err}
	}
	return t, nil
}

// DecodeRunRecord checks and decodes a stored run record as every reader
// does: bounded size, UTF-8 text, bounded nesting, then
// transcript.DecodeRun. A record that fails wraps ErrDamaged (a store with
// a second copy turns to it). where names it in the error.
func DecodeRunRecord(b []byte, where string) (transcript.Run, error) {
	rec, err := decodeRunRecord(b, where)
	if err != nil {
		return rec, fmt.Errorf("%w (%w)", err, ErrDamaged)
	}
	return rec, nil
}

// decodeRunRecord is DecodeRunRecord with its errors wrapping
// errUnreadable instead.
func decodeRunRecord(b []byte, where string) (transcript.Run, error) {
	unreadable := func(why error) error {
		return fmt.Errorf("%s: %w (%w)", where, why, errUnreadable)
	}
	if int64(len(b)) > maxRunBytes {
		return transcript.Run{}, unreadable(fmt.Errorf("%w: it is over %s", inputcheck.ErrTooLarge, inputcheck.Size(maxRunBytes)))
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return transcript.Run{}, unreadable(errEmpty)
	}
	if p := inputcheck.Text(b, "run record"); p != nil {
		return transcript.Run{}, unreadable(p)
	}
	if p := inputcheck.JSONDepth(b); p != nil {
		return transcript.Run{}, unreadable(p)
	}
	rec, err := transcript.DecodeRun(b)
	if err != nil {
		return transcript.Run{}, unreadable(err)
	}
	return rec, nil
}

// MarkInterrupted shows a record that says running, read while no live
// process holds the run, as interrupted, with a note naming the
// coordinator that ended (from the record, else holder, the run's last
// holder).
func MarkInterrupted(rec transcript.Run, holder transcript.Owner, live bool) transcript.Run {
	if rec.Collect != transcript.CollectRunning || live {
		return rec
	}
	rec.Collect = transcript.CollectInterrupted
	why := "its coordinator ended before it could record how the run ended"
	if rec.Owner != nil {
		why = fmt.Sprintf("its coordinator (%s) ended before it could record how the run ended", rec.Owner)
	} else if holder.PID != 0 {
		why = fmt.Sprintf("its coordinator (%s) ended before it could record how the run ended", holder)
	}
	rec.Note = strings.TrimPrefix(rec.Note+"; "+why, "; ")
	return rec
}

// EncodeCases is the stored form of a run's cases: one JSON line each.
func EncodeCases(cases []transcript.Case) ([]byte, error) {
	var b bytes.Buffer
	for _, c := range cases {
		line, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// DecodeCases reads what EncodeCases wrote, with numbers in metadata as
// json.Number, as the dataset loaders give them. where names it in errors.
func DecodeCases(rd io.Reader, where string) ([]transcript.Case, error) {
	var cases []transcript.Case
	err := eachLine(rd, func(line []byte, last bool) error {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var c transcript.Case
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		cases = append(cases, c)
		return nil
	})
	return cases, err
}

// EachLine calls fn for every non-empty line of rd, however long, without
// its line ending.
func EachLine(rd io.Reader, fn func(line []byte) error) error {
	return eachLine(rd, func(line []byte, _ bool) error { return fn(line) })
}

// RunSummary is one run as a listing of runs shows it.
type RunSummary struct {
	ID       string
	Location string
	Record   transcript.Run
	// Err is why the record could not be read; Record is then empty.
	Err error
}

// SortRuns orders a listing of runs newest first: by the run record's
// start, then by id. Every store's listing is in this order.
func SortRuns(runs []RunSummary) {
	slices.SortStableFunc(runs, func(a, b RunSummary) int {
		if c := b.Record.Started.Compare(a.Record.Started); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}
