package servers_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/mst-eval/mst/servers"
)

// runConnectDeaf is the worker of TestServerDiesWithItsWorker: it starts
// a server that, once its stdin closes, stays, ignoring SIGTERM and
// SIGPIPE, prints its id and waits to be killed.
func runConnectDeaf() int {
	exe, _ := os.Executable()
	s := servers.Server{Name: "deaf", Command: "/bin/sh",
		Args: []string{"-c", `echo $$ > "$MST_DIR/server"; trap '' TERM PIPE; "$0" 2>/dev/null; exec sleep 100000`, exe},
		Env:  map[string]string{roleEnv: "catalog", "MST_DIR": os.Getenv("MST_DIR")}}
	if _, err := servers.Connect(context.Background(), s); err != nil {
		return 1
	}
	b, _ := os.ReadFile(filepath.Join(os.Getenv("MST_DIR"), "server"))
	os.Stdout.Write(b)
	for {
		time.Sleep(time.Hour)
	}
}
