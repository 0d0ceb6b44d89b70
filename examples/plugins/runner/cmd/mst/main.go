// Command mst is mst with the subdir runner compiled in: what
// `mst build --with example.com/mst-plugins/runner` makes.
package main

import (
	"github.com/mst-eval/mst/mstcmd"

	"example.com/mst-plugins/runner"
)

func main() { mstcmd.Main(runner.Plugin()) }
