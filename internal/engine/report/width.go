package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The text report fits a terminal's width: tables leave out their least
// needed columns, then shorten their widest cells with "…"; sentences
// wrap at word boundaries. A width of 0 means no limit (output that goes
// to a file or a pipe). Widths count characters (runes), as text/tabwriter
// does.

// minWidth is the narrowest width the report tries to fit; below it,
// lines are as narrow as they can be and may be longer.
const minWidth = 20

// Column is one column of a table that fits a width.
type Column struct {
	Head string
	// Drop is the order in which the column is left out when the table is
	// too wide: 0 never, then 1 first, 2 next, and so on.
	Drop int
	// Shrink allows the column's cells to be cut short with "…" when the
	// table is still too wide once every column that may be was left out.
	Shrink bool
}

// Table is a text table that fits a width.
type Table struct {
	Columns []Column
	Rows    [][]string
	// Indent is written before every line.
	Indent string
}

// gap is the space between two columns.
const gap = 2

// Write writes the table within width characters (0: no limit) and
// returns how many columns it left out.
func (t Table) Write(w io.Writer, width int) (dropped int) {
	keep := make([]bool, len(t.Columns))
	for i := range keep {
		keep[i] = true
	}
	widths := t.widths()
	total := func() int {
		n, cols := utf8.RuneCountInString(t.Indent), 0
		for i, k := range keep {
			if k {
				n += widths[i]
				cols++
			}
		}
		return n + gap*max(cols-1, 0)
	}
	if width > 0 {
		width = max(width, minWidth)
		// Leave out columns, lowest Drop rank first, until the table fits.
		for total() > width {
			best := -1
			for i, c := range t.Columns {
				if keep[i] && c.Drop > 0 && (best < 0 || c.Drop < t.Columns[best].Drop) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			keep[best] = false
			dropped++
		}
		// Then cut the widest shrinkable column, a character at a time
		// off the widest, down to a few characters each.
		for over := total() - width; over > 0; over-- {
			widest := -1
			for i, c := range t.Columns {
				if keep[i] && c.Shrink && widths[i] > 4 && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
		}
	}
	write := func(cells []string) {
		var b strings.Builder
		b.WriteString(t.Indent)
		var last []int
		for i, k := range keep {
			if k {
				last = append(last, i)
			}
		}
		for j, i := range last {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			cell = cut(cell, widths[i])
			b.WriteString(cell)
			if j < len(last)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+gap))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	head := make([]string, len(t.Columns))
	hasHead := false
	for i, c := range t.Columns {
		head[i] = c.Head
		hasHead = hasHead || c.Head != ""
	}
	if hasHead {
		write(head)
	}
	for _, r := range t.Rows {
		write(r)
	}
	return dropped
}

// widths are the columns' natural widths.
func (t Table) widths() []int {
	ws := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		ws[i] = utf8.RuneCountInString(c.Head)
	}
	for _, r := range t.Rows {
		for i := range ws {
			if i < len(r) {
				ws[i] = max(ws[i], utf8.RuneCountInString(r[i]))
			}
		}
	}
	return ws
}

// cut shortens s to n characters, ending it with "…" when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Wrap breaks s into lines of at most width characters (0: no limit) at
// spaces; the first line keeps the spaces s starts with, lines after it
// start with indent. A word longer than a
// line (an id, a path) is kept whole on a line of its own: cut, it could
// not be copied.
func Wrap(s string, width int, indent string) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	in := utf8.RuneCountInString(indent)
	// Leading spaces (an indent of the first line) are kept.
	lead := s[:len(s)-len(strings.TrimLeft(s, " "))]
	var lines []string
	room := func() int {
		if len(lines) == 0 {
			return max(width-len(lead), 1)
		}
		return max(width-in, 1)
	}
	line := []rune{}
	for _, f := range strings.Fields(s) {
		word := []rune(f)
		if len(line) > 0 && len(line)+1+len(word) <= room() {
			line = append(append(line, ' '), word...)
			continue
		}
		if len(line) > 0 {
			lines = append(lines, string(line))
		}
		line = word
	}
	if len(line) > 0 {
		lines = append(lines, string(line))
	}
	if len(lines) > 0 {
		lines[0] = lead + lines[0]
	}
	for i := 1; i < len(lines); i++ {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
}
