package secrets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// Load reads the secrets file at path (see the package doc for its format).
// The error names the file and line of every problem, never a value. A file
// that other users may read is loaded, with a warning in Set.Warnings.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the secrets file: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("secrets file %s is a folder; give a file of KEY=value lines", path)
	}
	s, err := Parse(path, f)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		s.warnings = append(s.warnings, fmt.Sprintf("secrets file %s can be read by other users (mode %04o); make it private with chmod 600 %s", path, perm, path))
	}
	return s, nil
}

// Parse reads KEY=value lines from r; name is the file name used in errors.
// It reports every bad line (up to ten), each as name:line, and never shows
// a value or a line that may hold one.
func Parse(name string, r io.Reader) (*Set, error) {
	s := New()
	firstLine := map[string]int{}
	var errs []error
	fail := func(n int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", name, n, fmt.Sprintf(format, args...)))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() && len(errs) <= errLimit {
		n++
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff") // a byte-order mark some editors add
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			line = strings.TrimSpace(rest)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			fail(n, "not a KEY=value line (the line is not shown: it may hold a secret)")
			continue
		}
		key = strings.TrimSpace(key)
		if !ValidName(key) {
			fail(n, "the text before = is not a variable name (letters, digits and _, not starting with a digit); the line is not shown: it may hold a secret")
			continue
		}
		value, err := unquote(key, strings.TrimSpace(value))
		if err != nil {
			fail(n, "%v", err)
			continue
		}
		if first, dup := firstLine[key]; dup {
			fail(n, "%s is set again (first on line %d); keep one of the two lines", key, first)
			continue
		}
		firstLine[key] = n
		if err := s.Add(key, value); err != nil {
			fail(n, "%v", err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = errors.New("a line is longer than 1 MiB; is this a secrets file?")
		}
		errs = append(errs, fmt.Errorf("%s:%d: %w", name, n+1, err))
	}
	if len(errs) > errLimit {
		errs = append(errs[:errLimit], errTooMany)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// unquote removes one pair of matching quotes around a value.
func unquote(key, v string) (string, error) {
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return v, nil
	}
	if len(v) < 2 || v[len(v)-1] != v[0] {
		return "", fmt.Errorf("the value of %s opens a quote (%c) that the line does not close", key, v[0])
	}
	return v[1 : len(v)-1], nil
}
