package inputcheck

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// YAMLTokens checks the tokens of a YAML file, before the parser builds
// its tree from them, for brackets of flow style ([…] and {…}) nested
// deeper than MaxDepth: the parser's time grows with the square of that
// depth. Block nesting needs indentation, which costs the file its size,
// and is bounded after parsing by YAMLNodes.
func YAMLTokens(tokens token.Tokens) *Problem {
	depth := 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			depth++
			if depth > MaxDepth {
				p := &Problem{Msg: DepthMessage()}
				if tk.Position != nil {
					p.Line, p.Col = tk.Position.Line, tk.Position.Column
				}
				return p
			}
		case token.SequenceEndType, token.MappingEndType:
			depth = max(depth-1, 0)
		}
	}
	return nil
}

// YAMLNodes checks a parsed YAML document: its values nest at most
// MaxDepth deep, aliases included, and expanding its aliases adds at most
// MaxAliasNodes values; and no double-quoted string escapes a lone UTF-16
// surrogate, which the parser would turn silently into U+FFFD. data is the
// text n was parsed from. It stops at the first problem, so its work is
// bounded by the size of the tree.
func YAMLNodes(n ast.Node, data []byte) *Problem {
	w := &yamlWalker{anchors: map[string]yamlCost{}, data: data}
	w.walk(n, 1)
	return w.problem
}

// quoteAt returns the offset of the first double quote at or after line
// and col (1-based) in the text, or -1.
func (w *yamlWalker) quoteAt(line, col int) int {
	off := 0
	for i := 1; i < line; i++ {
		j := bytes.IndexByte(w.data[off:], '\n')
		if j < 0 {
			return -1
		}
		off += j + 1
	}
	off = min(off+max(col-1, 0), len(w.data))
	if j := bytes.IndexByte(w.data[off:], '"'); j >= 0 {
		return off + j
	}
	return -1
}

// yamlCost is what a value costs once expanded: how many values it holds
// (itself included) and how deep it nests.
type yamlCost struct{ nodes, depth int }

type yamlWalker struct {
	data    []byte // the file's text
	anchors map[string]yamlCost
	aliased int // values added by expanding aliases so far
	problem *Problem
}

func (w *yamlWalker) fail(tk *token.Token, msg string) {
	if w.problem != nil {
		return
	}
	p := &Problem{Msg: msg}
	if tk != nil && tk.Position != nil {
		p.Line, p.Col = tk.Position.Line, tk.Position.Column
	}
	w.problem = p
}

// walk returns the cost of n, found at depth.
func (w *yamlWalker) walk(n ast.Node, depth int) yamlCost {
	if n == nil || w.problem != nil {
		return yamlCost{}
	}
	if depth > MaxDepth {
		w.fail(n.GetToken(), DepthMessage())
		return yamlCost{}
	}
	sum := func(children ...ast.Node) yamlCost {
		c := yamlCost{nodes: 1, depth: 1}
		for _, ch := range children {
			cc := w.walk(ch, depth+1)
			c.nodes = min(c.nodes+cc.nodes, MaxAliasNodes+1)
			c.depth = max(c.depth, cc.depth+1)
		}
		return c
	}
	switch v := n.(type) {
	case *ast.StringNode:
		// The parser turns an escaped low surrogate into U+FFFD.
		// It keeps no trace of the escape, so the text is read again.
		if tk := v.GetToken(); tk != nil && tk.Type == token.DoubleQuoteType && tk.Position != nil && strings.ContainsRune(v.Value, utf8.RuneError) {
			if at := w.quoteAt(tk.Position.Line, tk.Position.Column); at >= 0 {
				if p := surrogates(w.data[at+1:], true); p != nil {
					w.fail(tk, p.Msg)
				}
			}
		}
	case *ast.DocumentNode:
		return w.walk(v.Body, depth)
	case *ast.MappingNode:
		children := make([]ast.Node, len(v.Values))
		for i, mv := range v.Values {
			children[i] = mv
		}
		return sum(children...)
	case *ast.MappingValueNode:
		k := w.walk(v.Key, depth)
		val := w.walk(v.Value, depth)
		return yamlCost{nodes: min(k.nodes+val.nodes, MaxAliasNodes+1), depth: max(k.depth, val.depth)}
	case *ast.MappingKeyNode:
		return w.walk(v.Value, depth)
	case *ast.SequenceNode:
		return sum(v.Values...)
	case *ast.TagNode:
		return w.walk(v.Value, depth)
	case *ast.AnchorNode:
		c := w.walk(v.Value, depth)
		if v.Name != nil {
			w.anchors[v.Name.String()] = c
		}
		return c
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.String()
		}
		c, ok := w.anchors[name]
		if !ok {
			return yamlCost{nodes: 1, depth: 1}
		}
		if depth-1+c.depth > MaxDepth {
			w.fail(v.GetToken(), fmt.Sprintf("alias *%s: %s", name, DepthMessage()))
			return yamlCost{}
		}
		w.aliased += c.nodes
		if w.aliased > MaxAliasNodes {
			w.fail(v.GetToken(), fmt.Sprintf("alias *%s: expanding the aliases would make more than %d values, the most MST expands (is this file built to be expanded, a \"billion laughs\"?)", name, MaxAliasNodes))
			return yamlCost{}
		}
		return c
	}
	return yamlCost{nodes: 1, depth: 1}
}
