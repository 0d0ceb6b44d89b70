// Package store keeps runs on disk: one folder per run holding run.json,
// the eval config as it was, the cases, the transcripts and the grades.
// Every write is atomic (a temporary file renamed into place), so a crash
// leaves either the old file or the new one, never half of one. Every write
// through a Run passes through its Redact, when set, so no secret value
// reaches the disk.
//
// Layout of a run folder:
//
//	run.json                       the run record (transcript.Run)
//	eval.yaml                      the config file the run was made from
//	cases.jsonl                    the cases, as loaded
//	transcripts/VARIANT/CASE.tN.json   one transcript per trial
//	grades.json                    the grades of every graded trial
package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mst-eval/mst/dataset"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/transcript"
)

// Run is one run's folder.
type Run struct {
	Dir string
	// Redact, when set, removes every secret value from what the Run's
	// write methods (WriteFile, WriteJSON, WriteStream, WriteTranscript,
	// WriteCases) store. Set it before the first write; reads return what
	// was stored. The package function WriteAtomic does not redact.
	Redact *secrets.Redactor
}

// Open returns the run at dir, or the run named id under a results folder.
func Open(path string) (*Run, error) {
	if _, err := os.Stat(filepath.Join(path, "run.json")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not a run folder (it has no run.json); give the folder mst run printed, e.g. mst-results/<run-id>", path)
		}
		return nil, err
	}
	return &Run{Dir: path}, nil
}

// Create makes a new run folder under results.
func Create(results, id string) (*Run, error) {
	dir := filepath.Join(results, id)
	if err := os.MkdirAll(filepath.Join(dir, "transcripts"), 0o755); err != nil {
		return nil, fmt.Errorf("creating the run folder: %w", err)
	}
	return &Run{Dir: dir}, nil
}

// WriteFile writes data, redacted, to name inside the run folder
// atomically. data is not changed.
func (r *Run) WriteFile(name string, data []byte) error {
	return WriteAtomic(filepath.Join(r.Dir, filepath.FromSlash(name)), r.Redact.Bytes(data))
}

// WriteJSON writes v as indented JSON, redacted, to name atomically.
func (r *Run) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return r.WriteFile(name, append(b, '\n'))
}

// ReadRun reads run.json, accepting older versions.
func (r *Run) ReadRun() (transcript.Run, error) {
	var run transcript.Run
	b, err := os.ReadFile(filepath.Join(r.Dir, "run.json"))
	if err != nil {
		return run, err
	}
	if err := json.Unmarshal(b, &run); err != nil {
		return run, fmt.Errorf("%s: %w", filepath.Join(r.Dir, "run.json"), err)
	}
	return run, nil
}

// TranscriptPath is where the transcript of key lives, relative to the run
// folder. Case ids and variant names are escaped so any id makes a safe
// file name.
func TranscriptPath(k transcript.Key) string {
	return "transcripts/" + escape(k.Variant) + "/" + escape(k.Case) + ".t" + strconv.Itoa(k.Trial) + ".json"
}

func escape(s string) string {
	e := url.PathEscape(s) // escapes "/" and "%", so distinct ids stay distinct
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// WriteTranscript stores t, redacted, at its path and returns that path.
func (r *Run) WriteTranscript(t *transcript.Transcript) (string, error) {
	p := TranscriptPath(t.Key)
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	if err := r.WriteFile(p, append(b, '\n')); err != nil {
		return "", err
	}
	return p, nil
}

// ReadTranscript reads one transcript file.
func ReadTranscript(path string) (*transcript.Transcript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t transcript.Transcript
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Normalize()
	return &t, nil
}

// Transcripts calls fn for every transcript in the run, one at a time, so
// memory stays flat however many there are.
func (r *Run) Transcripts(fn func(t *transcript.Transcript) error) error {
	root := filepath.Join(r.Dir, "transcripts")
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".json") {
			return nil
		}
		t, err := ReadTranscript(path)
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// WriteCases stores the cases as JSON lines, redacted.
func (r *Run) WriteCases(cases []dataset.Case) error {
	var b strings.Builder
	for _, c := range cases {
		line, err := json.Marshal(c)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return r.WriteFile("cases.jsonl", []byte(b.String()))
}

// ReadCases reads the cases stored with the run.
func (r *Run) ReadCases() ([]dataset.Case, error) {
	f, err := os.Open(filepath.Join(r.Dir, "cases.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cases []dataset.Case
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 64<<20)
	for s.Scan() {
		var c dataset.Case
		if err := json.Unmarshal(s.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		cases = append(cases, c)
	}
	return cases, s.Err()
}

// WriteStream writes name atomically from what fill writes to w, redacted,
// so large files are never held in memory whole.
func (r *Run) WriteStream(name string, fill func(w io.Writer) error) error {
	path := filepath.Join(r.Dir, filepath.FromSlash(name))
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	var w io.Writer = bw
	var rw *secrets.Writer
	if r.Redact != nil {
		rw = r.Redact.Writer(bw)
		w = rw
	}
	err = fill(w)
	if err == nil && rw != nil {
		err = rw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// WriteAtomic writes data to path through a temporary file in the same
// folder, renamed into place: a crash of MST leaves the old file or the new
// one. (It does not sync, so a power cut may lose the last writes.)
func WriteAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
