package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
	"github.com/mst-eval/mst/internal/ground/yamljson"
)

// document is a config file decoded into plain JSON values — map[string]any,
// []any, string, json.Number, bool and nil — together with where each value
// sits in the file.
type document struct {
	root any
	// pos maps a location (see pointer) to the line and column of its key,
	// or of the item for a list item.
	pos map[string]position
	// keys maps the location of an object to its keys in file order.
	keys map[string][]string
}

type position struct{ line, col int }

// syntaxError is a file that could not be parsed at all.
type syntaxError struct {
	position
	msg string
}

func newDocument() *document {
	return &document{pos: map[string]position{}, keys: map[string][]string{}}
}

// pointer turns a location (keys and list indexes from the root) into a map
// key.
func pointer(tokens []string) string { return strings.Join(tokens, "\x00") }

// child returns tokens followed by tok, never sharing tokens' array.
func child(tokens []string, tok string) []string {
	out := make([]string, len(tokens), len(tokens)+1)
	copy(out, tokens)
	return append(out, tok)
}

// position returns where tokens sits, or failing that where its closest
// located ancestor sits.
func (d *document) position(tokens []string) position {
	for n := len(tokens); n > 0; n-- {
		if p, ok := d.pos[pointer(tokens[:n])]; ok {
			return p
		}
	}
	return position{}
}

// value returns the value at tokens, and whether there is one.
func (d *document) value(tokens []string) (any, bool) {
	cur := d.root
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// parseYAML reads a YAML file holding a single document.
func parseYAML(data []byte) (*document, *syntaxError) {
	tokens := lexer.Tokenize(string(data))
	if p := inputcheck.YAMLTokens(tokens); p != nil {
		return nil, fromProblem(p)
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, yamlError(data, err)
	}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		if _, ok := doc.Body.(*ast.CommentGroupNode); ok {
			continue
		}
		bodies = append(bodies, doc.Body)
	}
	switch len(bodies) {
	case 0:
		return nil, &syntaxError{msg: "the file is empty"}
	case 1:
	default:
		return nil, &syntaxError{position: nodeStart(bodies[1]), msg: fmt.Sprintf("the file holds %d YAML documents; an eval config is a single document (remove the --- separators)", len(bodies))}
	}
	if p := inputcheck.YAMLNodes(bodies[0], data); p != nil {
		return nil, fromProblem(p)
	}
	var v any
	if err := yaml.NodeToValue(bodies[0], &v, yaml.UseOrderedMap()); err != nil {
		return nil, yamlError(data, err)
	}
	d := newDocument()
	d.root = d.fromYAML(v, nil)
	d.walkYAML(bodies[0], nil)
	return d, nil
}

func yamlError(data []byte, err error) *syntaxError {
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := tokenPosition(ye.GetToken())
		return &syntaxError{position: p, msg: inputcheck.YAMLSyntax(data, p.line, ye.GetMessage())}
	}
	return &syntaxError{msg: inputcheck.YAMLSyntax(data, 0, err.Error())}
}

func fromProblem(p *inputcheck.Problem) *syntaxError {
	return &syntaxError{position: position{line: p.Line, col: p.Col}, msg: p.Msg}
}

func tokenPosition(tk *token.Token) position {
	if tk == nil || tk.Position == nil {
		return position{}
	}
	return position{line: tk.Position.Line, col: tk.Position.Column}
}

// nodeStart is where n begins in the file. A block mapping's own token is
// its first colon, so the start of its first key is used instead.
func nodeStart(n ast.Node) position {
	switch v := n.(type) {
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return nodeStart(v.Values[0])
		}
	case *ast.MappingValueNode:
		return nodeStart(v.Key)
	case *ast.MappingKeyNode:
		return tokenPosition(v.GetToken())
	}
	return tokenPosition(n.GetToken())
}

// fromYAML turns a decoded YAML value into a plain JSON value, recording the
// key order of every mapping.
func (d *document) fromYAML(v any, tokens []string) any {
	switch v := v.(type) {
	case yaml.MapSlice:
		m := make(map[string]any, len(v))
		var order []string
		for _, item := range v {
			k := keyString(item.Key)
			if _, dup := m[k]; !dup {
				order = append(order, k)
			}
			m[k] = d.fromYAML(item.Value, child(tokens, k))
		}
		d.keys[pointer(tokens)] = order
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = d.fromYAML(x, child(tokens, strconv.Itoa(i)))
		}
		return out
	default:
		return yamljson.Scalar(v)
	}
}

func keyString(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	if k == nil {
		return "null"
	}
	return fmt.Sprint(k)
}

// walkYAML records the position of every key and list item under n.
func (d *document) walkYAML(n ast.Node, tokens []string) {
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, mv := range n.Values {
			d.walkPair(mv, tokens)
		}
	case *ast.MappingValueNode:
		d.walkPair(n, tokens)
	case *ast.SequenceNode:
		for i, item := range n.Values {
			t := child(tokens, strconv.Itoa(i))
			if item != nil {
				d.pos[pointer(t)] = nodeStart(item)
				d.walkYAML(item, t)
			}
		}
	case *ast.AnchorNode:
		d.walkYAML(n.Value, tokens)
	case *ast.TagNode:
		d.walkYAML(n.Value, tokens)
	}
}

func (d *document) walkPair(mv *ast.MappingValueNode, tokens []string) {
	var key ast.Node = mv.Key
	if k, ok := key.(*ast.MappingKeyNode); ok {
		key = k.Value
	}
	if key == nil || key.Type() == ast.MergeKeyType {
		return
	}
	var name string
	switch k := key.(type) {
	case *ast.StringNode:
		name = k.Value
	case ast.ScalarNode:
		name = keyString(k.GetValue())
	default:
		name = key.String()
	}
	t := child(tokens, name)
	if _, seen := d.pos[pointer(t)]; !seen {
		d.pos[pointer(t)] = nodeStart(key)
	}
	if mv.Value != nil {
		d.walkYAML(mv.Value, t)
	}
}

// parseJSON reads a JSON file holding one value, rejecting duplicate keys.
func parseJSON(data []byte) (*document, *syntaxError) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &syntaxError{msg: "the file is empty"}
	}
	if p := inputcheck.JSONDepth(data); p != nil {
		return nil, fromProblem(p)
	}
	if p := inputcheck.JSONText(data); p != nil {
		return nil, fromProblem(p)
	}
	p := &jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), d: newDocument()}
	p.dec.UseNumber()
	root, err := p.value(nil)
	if err != nil {
		return nil, p.syntaxError(err)
	}
	at := p.start()
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &syntaxError{position: offsetPosition(data, at), msg: "unexpected text after the end of the JSON value"}
	}
	p.d.root = root
	return p.d, nil
}

type jsonParser struct {
	data []byte
	dec  *json.Decoder
	d    *document
}

// dupKeyError is a key given twice in one JSON object.
type dupKeyError struct {
	key    string
	offset int64
	first  position
}

func (e *dupKeyError) Error() string {
	return fmt.Sprintf("key %q is given twice (first on line %d)", e.key, e.first.line)
}

// start is the offset where the next token begins.
func (p *jsonParser) start() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *jsonParser) value(tokens []string) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	if n, ok := tok.(json.Number); ok {
		return canonicalNumber(n), nil
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch delim {
	case '{':
		m := map[string]any{}
		var order []string
		for p.dec.More() {
			at := p.start()
			kt, err := p.dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			t := child(tokens, key)
			if _, dup := m[key]; dup {
				return nil, &dupKeyError{key: key, offset: at, first: p.d.pos[pointer(t)]}
			}
			p.d.pos[pointer(t)] = offsetPosition(p.data, at)
			v, err := p.value(t)
			if err != nil {
				return nil, err
			}
			m[key] = v
			order = append(order, key)
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, err
		}
		p.d.keys[pointer(tokens)] = order
		return m, nil
	default: // '['
		out := []any{}
		for p.dec.More() {
			t := child(tokens, strconv.Itoa(len(out)))
			p.d.pos[pointer(t)] = offsetPosition(p.data, p.start())
			v, err := p.value(t)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, err
		}
		return out, nil
	}
}

func (p *jsonParser) syntaxError(err error) *syntaxError {
	var se *json.SyntaxError
	var de *dupKeyError
	switch {
	case errors.As(err, &de):
		return &syntaxError{position: offsetPosition(p.data, de.offset), msg: de.Error()}
	case errors.As(err, &se):
		// Token reports an imprecise offset; decoding the whole text
		// again gives the exact one.
		var v any
		if uerr := json.Unmarshal(p.data, &v); errors.As(uerr, &se) {
			return &syntaxError{position: offsetPosition(p.data, se.Offset-1), msg: inputcheck.JSONSyntax(p.data, se.Offset, se.Error())}
		}
		return &syntaxError{position: offsetPosition(p.data, se.Offset), msg: inputcheck.JSONSyntax(p.data, se.Offset, se.Error())}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &syntaxError{position: offsetPosition(p.data, int64(len(p.data))), msg: "unexpected end of file (a bracket or quote is not closed)"}
	}
	return &syntaxError{msg: err.Error()}
}

// offsetPosition converts a byte offset into a 1-based line and column
// (columns count characters, not bytes).
func offsetPosition(data []byte, off int64) position {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return position{line: line, col: utf8.RuneCount(before[lineStart:]) + 1}
}

// canonicalNumber writes a whole number given with a fraction or an
// exponent (3.0, 1e3) as an integer, so that it decodes into an int field
// as the schema, which counts it as an integer, promises.
func canonicalNumber(n json.Number) json.Number {
	if !strings.ContainsAny(string(n), ".eE") {
		return n
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return n
	}
	return json.Number(strconv.FormatInt(int64(f), 10))
}
