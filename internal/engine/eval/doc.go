// Package eval is the eval config: its model ([Config]), loading it from a
// YAML or JSON file ([Load]), and the JSON Schema that describes it
// ([Schema], printed by `mst schema` so editors can complete and explain a
// config).
//
// Loading is strict and reports every problem at once. A file is read within
// the bounds of package inputcheck (its size, UTF-8 text, nesting depth and
// YAML alias expansion, each refused with its place), parsed into plain JSON
// values (remembering the line and column of every key; a syntax error is
// told in MST's words, not the parser's), and then checked in four passes:
//
//  1. Old names: keys and clients that an earlier MST version accepted fail
//     with their replacement ("client \"mst\" was renamed: use api").
//  2. The config's JSON Schema: unknown keys, types, ranges and name
//     patterns. The validator's findings are rewritten into short sentences
//     with a did-you-mean for misspelt keys.
//  3. Cross references: variant servers, tool overrides and limits name
//     declared servers; a server has exactly one of command and url, and
//     an http(s) url; every dataset file exists (it is not read here).
//  4. Each variant against its client: its clientOptions against the
//     client's own options schema and MST's own options (timeout,
//     apiKeyEnv: [LiftOwnOptions]); with a [ClientCatalog], the model's
//     provider ([CheckModel]), the client's own Check of the model and
//     options, and what only MST's proxy offers (connector servers, tool
//     rewrites, dry runs, faults, limits.serverCalls) to a client that
//     starts the servers itself. Each grader goes through the [Catalog].
//
// Problems come back as [Errors], sorted by path, one per line:
//
//	eval.yaml:12:5: variants.terse.clientOptions.timeot: unknown option (did you mean timeout?)
//
// A config that passes is decoded into [Config] with defaults filled in and
// relative paths resolved against the config's folder.
// [CheckFiles] then checks, on this machine, the folders and programs its
// stdio servers name.
package eval
