// Command mst runs evals of how AI clients use MCP servers.
package main

import "github.com/mst-eval/mst/mstcmd"

func main() { mstcmd.Main() }
