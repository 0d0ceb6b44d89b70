// Package layers holds the test that keeps MST's packages in their floors
// (layers_test.go): records and configs at the bottom, then the protocol,
// clients and runners side by side, then the hub (run) and the command
// line, with only internal/builtin naming the concrete clients and
// runners. It has no code of its own.
package layers
