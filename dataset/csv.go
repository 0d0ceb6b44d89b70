package dataset

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// csvGraders lists the graders a CSV column can hold, sorted.
func csvGraders() []string {
	return []string{"answerContains", "answerMatches", "maxToolCalls", "toolCalled", "toolNotCalled"}
}

// numericGrader reports whether a grader's CSV cell is a whole number
// rather than text.
func numericGrader(name string) bool { return name == "maxToolCalls" }

// column is what one CSV column holds.
type column struct {
	kind string // "id", "input", "expect" or "metadata"
	name string // the grader or the metadata key
}

// readCSV reads a header row and one case per record.
func (r *reader) readCSV(data []byte) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return
	}
	if err != nil {
		r.csvError(err)
		return
	}
	cols, ok := r.csvHeader(header)
	if !ok {
		return
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			// The reader cannot find the next record reliably after a
			// broken quote, so this is the last problem reported.
			r.csvError(err)
			return
		}
		line, _ := cr.FieldPos(0)
		if !slices.ContainsFunc(rec, func(s string) bool { return s != "" }) {
			continue
		}
		if len(rec) != len(cols) {
			r.fail(line, "", fmt.Sprintf("the record has %d cells but the header names %d columns", len(rec), len(cols)))
			continue
		}
		r.csvCase(cols, rec, line)
	}
}

// csvHeader reads the header row. A header with problems is reported and
// the records are not read.
func (r *reader) csvHeader(header []string) ([]column, bool) {
	known := []string{"id", "input", "model"}
	for _, g := range csvGraders() {
		known = append(known, "expect."+g)
	}
	ok := true
	bad := func(msg string) {
		r.fail(1, "", msg)
		ok = false
	}
	cols := make([]column, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if seen[h] {
			bad(fmt.Sprintf("column %q appears twice", h))
			continue
		}
		seen[h] = true
		switch {
		case h == "id" || h == "input" || h == "model":
			cols[i] = column{kind: h}
		case strings.HasPrefix(h, "expect."):
			g := strings.TrimPrefix(h, "expect.")
			if names := csvGraders(); !slices.Contains(names, g) {
				bad(fmt.Sprintf("column %q: a CSV column can hold only the graders %s%s", h, strings.Join(names, ", "), didYouMean(g, names)))
				continue
			}
			cols[i] = column{kind: "expect", name: g}
		case strings.HasPrefix(h, "metadata."):
			k := strings.TrimPrefix(h, "metadata.")
			if k == "" {
				bad(fmt.Sprintf("column %q: name the metadata key after the dot", h))
				continue
			}
			cols[i] = column{kind: "metadata", name: k}
		default:
			bad(fmt.Sprintf("unknown column %q%s: columns are id, input, model, expect.<grader> and metadata.<key>", h, didYouMean(h, known)))
		}
	}
	for _, need := range []string{"id", "input"} {
		if !seen[need] {
			bad(fmt.Sprintf("missing column %q (the first row names the columns)", need))
		}
	}
	return cols, ok
}

// csvCase checks one record and keeps it as a case when it has no problems.
func (r *reader) csvCase(cols []column, rec []string, line int) {
	c := Case{Source: fmt.Sprintf("%s:%d", r.file, line)}
	var problems []string
	for i, col := range cols {
		cell := rec[i]
		switch col.kind {
		case "id":
			if strings.TrimSpace(cell) == "" {
				problems = append(problems, "missing id")
			} else {
				c.ID = cell
			}
		case "input":
			if strings.TrimSpace(cell) == "" {
				problems = append(problems, "input is blank")
			}
			c.Input = cell
		case "model":
			c.Model = strings.TrimSpace(cell)
		case "expect":
			if cell == "" {
				continue
			}
			var v any = cell
			if numericGrader(col.name) {
				n, err := strconv.Atoi(strings.TrimSpace(cell))
				if err != nil {
					problems = append(problems, fmt.Sprintf("expect.%s must be a whole number, got %q", col.name, cell))
					continue
				}
				v = n
			}
			raw, err := marshal(map[string]any{col.name: v})
			if err != nil {
				problems = append(problems, fmt.Sprintf("expect.%s: %v", col.name, err))
				continue
			}
			c.Expect = append(c.Expect, raw)
		case "metadata":
			if cell == "" {
				continue
			}
			if c.Metadata == nil {
				c.Metadata = map[string]any{}
			}
			c.Metadata[col.name] = cell
		}
	}
	r.keep(c, line, problems)
}

func (r *reader) csvError(err error) {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		msg := fmt.Sprintf("column %d: %s", pe.Column, csvWords(pe.Err))
		if pe.StartLine != pe.Line {
			msg = fmt.Sprintf("a quote is left open: the row that starts here runs on to line %d, column %d; close the quoted field with \", and write \"\" for a quote inside it", pe.Line, pe.Column)
		}
		r.fail(pe.StartLine, "", msg)
		return
	}
	r.fail(0, "", "the CSV cannot be read: check its quotes and separators")
}

// csvWords says in MST's words what encoding/csv found wrong in a row.
func csvWords(err error) string {
	switch {
	case errors.Is(err, csv.ErrBareQuote):
		return `a quote inside a field that does not start with one: put the whole field in quotes and write "" for each quote inside it ("say ""hi""")`
	case errors.Is(err, csv.ErrQuote):
		return `text after the closing quote of a quoted field: end the field after the quote, or write "" for a quote inside it`
	case errors.Is(err, csv.ErrFieldCount):
		return "this row has another number of fields than the header: check the commas, and quote a field that holds one"
	}
	return "the CSV cannot be read here: check the quotes and commas of this row"
}
