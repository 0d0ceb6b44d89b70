package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the packages in shortFuncs, from its
// func line to its closing brace: the protocol's two sides are read
// message by message, and a function that grows past a screen hides
// which state each message touches.
const maxFuncLines = 80

// shortFuncs are the packages held to maxFuncLines (their tests are not).
var shortFuncs = []string{"internal/engine/shard", "protocol"}

func TestFunctionLength(t *testing.T) {
	t.Parallel()
	for _, dir := range shortFuncs {
		files, err := filepath.Glob(filepath.Join("../../..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
				if n := end - start + 1; n > maxFuncLines {
					t.Errorf("%s:%d: %s is %d lines; split it by meaning (at most %d)", filepath.Join(dir, filepath.Base(f)), start, fn.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}
