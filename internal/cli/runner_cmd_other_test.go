//go:build !unix

package cli_test

import "testing"

func testDockerInterrupt(t *testing.T, tools string) {
	t.Skip("needs process groups")
}
