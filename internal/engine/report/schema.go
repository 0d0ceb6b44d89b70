package report

import _ "embed"

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema of a Report (kind mst.report), a
// RunComparison (kind mst.compare) and a GradeSetComparison (kind
// mst.compare-grades) as they marshal, which mst schema report prints.
func Schema() []byte { return schema }
