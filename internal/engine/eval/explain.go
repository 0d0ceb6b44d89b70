package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// problem is one finding before it is given a file and a position.
type problem struct {
	tokens []string
	msg    string
}

// explainer rewrites a validator's error tree into short sentences, one per
// problem, each at the location it concerns.
type explainer struct {
	cs  *compiledSchema
	doc *document
	// noun names an object's keys in messages: "key" in the config,
	// "option" in clientOptions.
	noun string
	// prefix is where the validated value sits in doc.
	prefix []string
}

// explain returns the problems err describes.
func (x *explainer) explain(err error) []problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []problem{{tokens: x.prefix, msg: err.Error()}}
	}
	return x.walk(ve)
}

func (x *explainer) loc(e *jsonschema.ValidationError) []string {
	return append(slices.Clone(x.prefix), e.InstanceLocation...)
}

func (x *explainer) walk(e *jsonschema.ValidationError) []problem {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		return x.causes(e)
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			msg := "matches more than one of the allowed forms"
			if _, isObj := valueAt(x.doc, x.loc(e)).(map[string]any); isObj {
				msg += "; keep the keys of one"
			}
			return []problem{{x.loc(e), msg}}
		}
		return x.alternatives(e)
	case *kind.AnyOf:
		return x.alternatives(e)
	case *kind.Required:
		var out []problem
		for _, m := range k.Missing {
			out = append(out, problem{child(x.loc(e), m), "missing required " + x.noun})
		}
		return out
	case *kind.AdditionalProperties:
		noun := x.noun
		var known []string
		if s := x.cs.at(e.SchemaURL); s != nil {
			if n, ok := s["x-keyNoun"].(string); ok {
				noun = n
			}
			if props, ok := s["properties"].(map[string]any); ok {
				for name := range props {
					if name != "$schema" {
						known = append(known, name)
					}
				}
			}
		}
		var out []problem
		for _, p := range k.Properties {
			out = append(out, problem{child(x.loc(e), p), "unknown " + noun + hint(p, known)})
		}
		return out
	case *kind.PropertyNames:
		// The validator hands out this error's InstanceLocation without
		// copying it, so later work may have overwritten it. Trust it only
		// when it holds an object with the key; otherwise look for one.
		loc := x.loc(e)
		if m, ok := valueAt(x.doc, loc).(map[string]any); !ok || !hasKey(m, k.Property) {
			if found, ok := findOwner(valueAt(x.doc, x.prefix), x.prefix, k.Property); ok {
				loc = found
			} else {
				loc = slices.Clone(x.prefix)
			}
		}
		var out []problem
		for _, c := range leaves(e) {
			out = append(out, problem{child(loc, k.Property), "invalid name: " + x.message(c, false)})
		}
		return out
	}
	if len(e.Causes) > 0 {
		return x.causes(e)
	}
	return []problem{{x.loc(e), x.message(e, true)}}
}

func (x *explainer) causes(e *jsonschema.ValidationError) []problem {
	var out []problem
	for _, c := range e.Causes {
		out = append(out, x.walk(c)...)
	}
	return out
}

// alternatives explains a failed oneOf or anyOf. A branch whose type does
// not fit the value is not what the author meant; if exactly one branch
// fits, its problems are the ones to show. If none fits, the value has the
// wrong type. If several fit, the branch whose problems lie deepest in the
// value is the likeliest intent.
func (x *explainer) alternatives(e *jsonschema.ValidationError) []problem {
	var wants []string
	type branch struct {
		problems []problem
		depth    int
	}
	var fits []branch
	for _, c := range e.Causes {
		if t := typeAt(c, e.InstanceLocation); t != nil {
			wants = append(wants, t.Want...)
			continue
		}
		b := branch{problems: x.walk(c)}
		for _, p := range b.problems {
			b.depth = max(b.depth, len(p.tokens))
		}
		fits = append(fits, b)
	}
	loc := x.loc(e)
	switch len(fits) {
	case 0:
		v, _ := x.doc.value(loc)
		return []problem{{loc, "must be " + typeList(wants) + ", got " + describe(v)}}
	case 1:
		return fits[0].problems
	}
	sort.SliceStable(fits, func(i, j int) bool { return fits[i].depth > fits[j].depth })
	if fits[0].depth > fits[1].depth {
		return fits[0].problems
	}
	return []problem{{loc, "does not match any of the allowed forms (`mst schema` prints them)"}}
}

// typeAt finds a type mismatch of the value at loc itself in e, looking
// through wrappers.
func typeAt(e *jsonschema.ValidationError, loc []string) *kind.Type {
	if t, ok := e.ErrorKind.(*kind.Type); ok && slices.Equal(e.InstanceLocation, loc) {
		return t
	}
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range e.Causes {
			if t := typeAt(c, loc); t != nil {
				return t
			}
		}
	}
	return nil
}

// leaves returns the errors of e that have no causes.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// message words a single finding about the value at e's location. withGot
// adds the offending value where the message would not show it otherwise.
func (x *explainer) message(e *jsonschema.ValidationError, withGot bool) string {
	v, _ := x.doc.value(x.loc(e))
	got := ""
	if withGot {
		got = ", got " + describe(v)
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		if n, isNum := v.(json.Number); isNum && x.isDuration(e) {
			return fmt.Sprintf("must be a duration with its unit, such as %ss or 2m, got the bare number %s (write %ss for seconds)", n, n, n)
		}
		return "must be " + typeList(k.Want) + ", got " + describe(v)
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, display(w))
		}
		msg := "must be one of " + strings.Join(want, ", ")
		if len(want) == 1 {
			msg = "must be " + want[0]
		}
		if s, ok := k.Got.(string); ok {
			var names []string
			for _, w := range k.Want {
				if ws, ok := w.(string); ok {
					names = append(names, ws)
				}
			}
			if dym := didYouMean(s, names); dym != "" {
				return fmt.Sprintf("%s, got %q%s", msg, s, dym)
			}
		}
		return msg + got
	case *kind.Const:
		return "must be " + display(k.Want) + got
	case *kind.Pattern:
		if s := x.cs.at(e.SchemaURL); s != nil {
			if m, ok := s["patternErrorMessage"].(string); ok {
				return m + got
			}
		}
		return fmt.Sprintf("must match the pattern %s", k.Want) + got
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long%s", k.Want, got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long (it has %d)", k.Want, k.Got)
	case *kind.Minimum:
		return "must be at least " + ratString(k.Want) + got
	case *kind.Maximum:
		return "must be at most " + ratString(k.Want) + got
	case *kind.ExclusiveMinimum:
		return "must be more than " + ratString(k.Want) + got
	case *kind.ExclusiveMaximum:
		return "must be less than " + ratString(k.Want) + got
	case *kind.MultipleOf:
		return "must be a multiple of " + ratString(k.Want) + got
	case *kind.MinItems:
		if k.Want == 1 {
			return "must not be empty: list at least one"
		}
		return fmt.Sprintf("must list at least %d items (it has %d)", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must list at most %d items (it has %d)", k.Want, k.Got)
	case *kind.MinProperties:
		if k.Want == 1 {
			return "must not be empty: declare at least one"
		}
		return fmt.Sprintf("must have at least %d entries (it has %d)", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d entries (it has %d)", k.Want, k.Got)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are the same; give each once", k.Duplicates[0], k.Duplicates[1])
	case *kind.DependentRequired:
		return fmt.Sprintf("%s needs %s too", k.Prop, strings.Join(k.Missing, ", "))
	case *kind.FalseSchema:
		return "is not allowed"
	case *kind.Not:
		return "is not allowed here" + got
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s%s", k.Want, got)
	}
	return e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// typeList words JSON Schema type names: "an integer", "a string or an
// object".
func typeList(types []string) string {
	var words []string
	for _, t := range types {
		w := map[string]string{
			"integer": "an integer",
			"number":  "a number",
			"string":  "a string",
			"boolean": "true or false",
			"object":  "an object",
			"array":   "a list",
			"null":    "null",
		}[t]
		if w == "" {
			w = t
		}
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return strings.Join(words, " or ")
}

// describe words a value for "got …": its type and, for scalars, the value.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "an empty value (null)"
	case string:
		return "string " + display(v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// display shows a scalar as it would be written, strings quoted and cut
// short.
func display(v any) string {
	if s, ok := v.(string); ok {
		if r := []rune(s); len(r) > 60 {
			s = string(r[:57]) + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}

func valueAt(d *document, tokens []string) any {
	v, _ := d.value(tokens)
	return v
}

// findOwner returns the location of the first object under v (at location
// at) that has key, visiting keys in sorted order.
func findOwner(v any, at []string, key string) ([]string, bool) {
	switch v := v.(type) {
	case map[string]any:
		if hasKey(v, key) {
			return at, true
		}
		for _, k := range sortedKeys(v) {
			if loc, ok := findOwner(v[k], child(at, k), key); ok {
				return loc, true
			}
		}
	case []any:
		for i, item := range v {
			if loc, ok := findOwner(item, child(at, strconv.Itoa(i)), key); ok {
				return loc, true
			}
		}
	}
	return nil, false
}

// isDuration reports whether the schema e is about describes a duration:
// its pattern is a duration's, or its description says so.
func (x *explainer) isDuration(e *jsonschema.ValidationError) bool {
	s := x.cs.at(e.SchemaURL)
	if s == nil {
		return false
	}
	pat, _ := s["pattern"].(string)
	desc, _ := s["description"].(string)
	return strings.Contains(pat, "(ns|us|µs|ms|s|m|h)") || strings.Contains(desc, "duration")
}
