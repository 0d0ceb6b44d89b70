// Package deps keeps the chosen dependencies in go.mod while the packages that use them are written. It goes when they are.
package deps

import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/goccy/go-yaml"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/openai/openai-go/v3/responses"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/term"
)

import (
	_ "github.com/anthropics/anthropic-sdk-go/v2/option"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/openai/openai-go/v3/option"
	_ "github.com/rogpeppe/go-internal/txtar"
)
