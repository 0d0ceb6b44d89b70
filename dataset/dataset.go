package dataset

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mst-eval/mst/transcript"
)

// Case is one input of a dataset. The record is transcript's, so the
// result store keeps cases without compiling a dataset reader.
type Case = transcript.Case

// Error is one problem with a dataset.
type Error struct {
	// File is the dataset's path as given to Load; empty for a problem that
	// concerns no file (an unknown id given to Select).
	File string
	// Line is where the problem is, 1-based; zero for the whole file.
	Line int
	// Case is the id of the case the problem concerns, when known.
	Case string
	// Msg says what is wrong.
	Msg string
}

// Error formats e as `FILE:LINE: case "ID": message`, leaving out what is
// unknown.
func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Case != "" {
		fmt.Fprintf(&b, "case %q: ", e.Case)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors are all the problems found, in file and line order.
type Errors []Error

// Error lists the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads the cases of one file. On any problem it returns no cases and
// an Errors listing all of them.
func Load(path string) ([]Case, error) {
	return LoadAll([]string{path})
}

// LoadAll reads the cases of several files, in order, and rejects a case id
// that appears twice, in one file or across files. On any problem it
// returns no cases and an Errors listing all of them.
func LoadAll(paths []string) ([]Case, error) {
	if len(paths) == 0 {
		return nil, Errors{{Msg: "no dataset files given"}}
	}
	readers := make([]*reader, len(paths))
	for i, p := range paths {
		readers[i] = readPath(p)
	}
	if err := checkAcross(readers); err != nil {
		return nil, err
	}
	var all []Case
	for _, r := range readers {
		all = append(all, r.cases...)
	}
	return all, nil
}

// checkAcross returns the problems of the readers, in their order, with
// ids that appear twice in one or across several; nil when there are none.
func checkAcross(readers []*reader) error {
	var errs Errors
	var ids []located
	for _, r := range readers {
		errs = append(errs, r.errs...)
		ids = append(ids, r.ids...)
	}
	first := map[string]located{}
	for _, l := range ids {
		if prev, dup := first[l.id]; dup {
			errs = append(errs, Error{File: l.file, Line: l.line, Case: l.id, Msg: fmt.Sprintf("duplicate id (first at %s:%d)", prev.file, prev.line)})
			continue
		}
		first[l.id] = l
	}
	if len(errs) == 0 {
		return nil
	}
	order := map[string]int{}
	for i, r := range readers {
		if _, seen := order[r.file]; !seen {
			order[r.file] = i
		}
	}
	slices.SortStableFunc(errs, func(a, b Error) int {
		if c := order[a.File] - order[b.File]; c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return errs
}

// located is where a case id was read, kept even for a case with other
// problems so that duplicates are found too.
type located struct {
	id, file string
	line     int
}

// Select returns the cases whose ids are listed, in dataset order, or all of
// them when ids is empty; then the first limit of those when limit > 0. An
// id that matches no case is an error that names close matches.
func Select(cases []Case, ids []string, limit int) ([]Case, error) {
	sel := slices.Clone(cases)
	if len(ids) > 0 {
		have := map[string]bool{}
		var all []string
		for _, c := range cases {
			have[c.ID] = true
			all = append(all, c.ID)
		}
		var errs Errors
		want := map[string]bool{}
		for _, id := range ids {
			if !have[id] {
				errs = append(errs, Error{Msg: fmt.Sprintf("unknown case %q%s", id, didYouMean(id, all))})
			}
			want[id] = true
		}
		if len(errs) > 0 {
			return nil, errs
		}
		sel = slices.DeleteFunc(sel, func(c Case) bool { return !want[c.ID] })
	}
	if limit > 0 && len(sel) > limit {
		sel = sel[:limit]
	}
	return sel, nil
}
