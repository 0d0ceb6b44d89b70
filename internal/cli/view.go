package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mst-eval/mst/internal/engine/report/htmlreport"
	"github.com/mst-eval/mst/internal/engine/run"
)

func newViewCmd(stdio Stdio) *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:   "view RUN",
		Short: "Show the HTML report of a run in a browser",
		Long: `Serve the HTML report of a run (the page mst report --html writes) on
127.0.0.1 and print its address; open it in a browser. The page is made
anew on every load, so reloading it shows how far a run that is still going
has got. Stop with Ctrl-C. RUN is the run's folder (as mst run printed it),
or a run id under ./mst-results. Only this machine can reach the page; from
another machine, forward the port (ssh -L PORT:127.0.0.1:PORT host).`,
		Example: `  mst view mst-results/quickstart/runs/quickstart-20261130-101500-a1b2c3
  mst view quickstart-20261130-101500-a1b2c3 --port 8080`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return withCode(ExitUsage, fmt.Errorf("--port %d: give a port from 1 to 65535, or 0 for a free one", port))
			}
			ctx := cmd.Context()
			st, err := openRun(ctx, stdio.parts().ResultStores(), args[0], "", nil)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			page := func(ctx context.Context) ([]byte, error) {
				rep, err := run.LoadReportWith(ctx, st, run.ReportOptions{Graders: stdio.Parts.Graders()})
				if err != nil {
					return nil, err
				}
				rec, err := st.ReadRun(ctx)
				if err != nil {
					return nil, err
				}
				var buf bytes.Buffer
				err = htmlreport.Write(ctx, &buf, rep, rec, st)
				return buf.Bytes(), err
			}
			// Make the page once before listening, so a run that cannot
			// be read fails here and not in the browser.
			if _, err := page(ctx); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("--port %d: %w (choose another port, or 0 for a free one)", port, err)
			}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
				// Only a page this machine asked for by its loopback
				// name: a web site whose name resolves to 127.0.0.1
				// (DNS rebinding) must not read the report.
				if h, _, _ := net.SplitHostPort(r.Host); h != "127.0.0.1" && h != "localhost" {
					http.Error(w, "mst view serves 127.0.0.1 and localhost only", http.StatusMisdirectedRequest)
					return
				}
				b, err := page(r.Context())
				if err != nil {
					http.Error(w, "mst: "+err.Error(), http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Header().Set("Cache-Control", "no-store")
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.Write(b)
			})
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			fmt.Fprintf(stdio.Out, "The report of %s is at http://%s/ (Ctrl-C to stop)\n", st.Location(), ln.Addr())
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
			}
			// Ctrl-C: stop at once. (Shutdown would wait for the
			// connections a browser opens ahead of time.)
			if err := srv.Close(); err != nil {
				return err
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "the port to listen on, on 127.0.0.1 (0: a free one)")
	return cmd
}
