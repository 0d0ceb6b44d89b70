package secrets

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// MinLength is the length, in bytes, below which a value cannot be a
// secret: redacting a value that short would rewrite ordinary text.
const MinLength = 4

// Set is a collection of named secret values. Its methods may be called
// from any goroutine. The zero Set is not usable; call New, Parse or Load.
type Set struct {
	mu sync.Mutex
	// current is the value each name has now: what clients get.
	current map[string]string
	// known is every (name, value) ever added, in the order they came,
	// so a replaced value is still redacted.
	known []entry
	seen  map[string]bool
	// pats is built from known on first use after a change; nil when stale.
	pats     []pattern
	warnings []string
}

type entry struct{ name, value string }

// New returns an empty Set.
func New() *Set {
	return &Set{current: map[string]string{}, seen: map[string]bool{}}
}

// ValidName reports whether name can name a secret: a shell variable name,
// [A-Za-z_][A-Za-z0-9_]*.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// checkValue says why value cannot be a secret of that name, or nil.
func checkValue(name, value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%s has an empty value; give it a value or leave it out", name)
	case len(value) < MinLength:
		return fmt.Errorf("the value of %s is shorter than %d bytes, too short to redact without mangling ordinary text; use a longer value", name, MinLength)
	case strings.ContainsAny(value, "\r\n"):
		return fmt.Errorf("the value of %s holds a line break, which MST cannot redact reliably; store it without line breaks (base64, for example)", name)
	}
	return nil
}

// Add sets name to value, for clients and for redaction. When name already
// has another value, clients get the new one and both stay redacted. It
// fails, without showing the value, when name is not a valid name or the
// value is empty, shorter than MinLength or holds a line break.
func (s *Set) Add(name, value string) error {
	if !ValidName(name) {
		return fmt.Errorf("%q is not a valid secret name (letters, digits and _, not starting with a digit)", name)
	}
	if err := checkValue(name, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current[name] = value
	if !s.seen[value] {
		s.seen[value] = true
		s.known = append(s.known, entry{name, value})
		s.pats = nil
	}
	return nil
}

// Get returns the current value of name.
func (s *Set) Get(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.current[name]
	return v, ok
}

// Withhold takes name out of what clients get (Env, Get, Names) and
// returns its value; the value stays redacted. A secret only MST itself
// uses (a credential store's key) is withheld as soon as it is read, so no
// client, server or worker is ever given it.
func (s *Set) Withhold(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.current[name]
	delete(s.current, name)
	return v, ok
}

// Names returns the names in the Set, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.current))
}

// Len returns how many names the Set holds.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.current)
}

// Env returns a new map of every name to its current value: the
// environment clients are given. Changes to the map do not reach the Set.
func (s *Set) Env() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.current)
}

// Warnings returns advice about the Set's source that is not an error, such
// as a secrets file other users can read, one sentence each.
func (s *Set) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.warnings)
}

// patterns returns what to look for, longest first, building it if the Set
// changed since the last call.
func (s *Set) patterns() []pattern {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pats == nil && len(s.known) > 0 {
		s.pats = buildPatterns(s.known)
	}
	return s.pats
}

// errLimit caps how many line errors Parse reports, so a wrong file (a
// binary, a JSON document) gives a readable message.
const errLimit = 10

var errTooMany = errors.New("… more errors not shown")
