package dataset

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"

	"github.com/mst-eval/mst/internal/ground/inputcheck"
	"github.com/mst-eval/mst/internal/ground/yamljson"
)

// readYAML reads a list of cases from a single YAML document.
func (r *reader) readYAML(data []byte) {
	tokens := lexer.Tokenize(string(data))
	if p := inputcheck.YAMLTokens(tokens); p != nil {
		r.problem(p)
		return
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		r.yamlError(data, err)
		return
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
		return
	case 1:
	default:
		r.fail(nodeLine(bodies[1]), "", fmt.Sprintf("the file holds %d YAML documents; put all cases in one list", len(bodies)))
		return
	}
	body := bodies[0]
	if p := inputcheck.YAMLNodes(body, data); p != nil {
		r.problem(p)
		return
	}
	var v any
	if err := yaml.NodeToValue(body, &v, yaml.UseOrderedMap()); err != nil {
		r.yamlError(data, err)
		return
	}
	list, ok := fromYAML(v).([]any)
	seq := sequence(body)
	if !ok || seq == nil || len(seq.Values) != len(list) {
		r.fail(nodeLine(body), "", "a YAML dataset must be a list of cases, each with id and input, got "+describe(fromYAML(v)))
		return
	}
	for i, item := range list {
		r.addObject(item, nodeLine(seq.Values[i]))
	}
}

// sequence returns the list node under n's anchors and tags.
func sequence(n ast.Node) *ast.SequenceNode {
	for {
		switch v := n.(type) {
		case *ast.SequenceNode:
			return v
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return nil
		}
	}
}

func (r *reader) yamlError(data []byte, err error) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		line := 0
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			line = tk.Position.Line
		}
		r.fail(line, "", inputcheck.YAMLSyntax(data, line, ye.GetMessage()))
		return
	}
	r.fail(0, "", inputcheck.YAMLSyntax(data, 0, err.Error()))
}

// nodeLine is the line where n begins; a block mapping's own token is its
// first colon, so its first key is used.
func nodeLine(n ast.Node) int {
	switch v := n.(type) {
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return nodeLine(v.Values[0])
		}
	case *ast.MappingValueNode:
		return nodeLine(v.Key)
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// fromYAML turns a decoded YAML value into the JSON values a JSON file
// would give: objects with string keys, numbers as json.Number.
func fromYAML(v any) any {
	switch v := v.(type) {
	case yaml.MapSlice:
		m := make(map[string]any, len(v))
		for _, item := range v {
			k, ok := item.Key.(string)
			if !ok {
				k = fmt.Sprint(item.Key)
			}
			m[k] = fromYAML(item.Value)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = fromYAML(x)
		}
		return out
	}
	return yamljson.Scalar(v)
}
