package shard

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
)

// TestBearerWaitsForTheAnswer: a connector server's token asked for at the
// start is waited for, then given; a refusal comes back as its reason; a
// fresh value replaces a refusal; a value that expires while a fresh one
// is asked for is waited for too; a name never asked for is not.
func TestBearerWaitsForTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked []string
		k := newWorkerTokens(secrets.New(), slog.New(slog.DiscardHandler), t.TempDir()+"/tokens", func(names []string, _ bool) { asked = append(asked, names...) })
		defer k.close()
		k.expect([]string{"MST_OAUTH_NOTES", "MST_OAUTH_DRIVE"})

		type got struct {
			v   string
			err error
		}
		wait := func(name string) chan got {
			c := make(chan got, 1)
			go func() {
				v, err := k.bearer(t.Context(), name)
				c <- got{v, err}
			}()
			return c
		}
		notes, drive := wait("MST_OAUTH_NOTES"), wait("MST_OAUTH_DRIVE")
		synctest.Wait()
		select {
		case g := <-notes:
			t.Fatalf("bearer returned %+v before any answer; want it to wait", g)
		default:
		}
		k.receive(&protocol.Tokens{
			Values:  map[string]string{"MST_OAUTH_NOTES": "access-token-notes-1"},
			Expires: map[string]time.Time{"MST_OAUTH_NOTES": time.Now().Add(time.Hour)},
			Errors:  map[string]string{"MST_OAUTH_DRIVE": "the grant was refused; run `mst auth drive -c eval.yaml`"},
		})
		if g := <-notes; g.err != nil || g.v != "access-token-notes-1" {
			t.Errorf("notes: %+v, want its value", g)
		}
		if g := <-drive; g.err == nil || !strings.Contains(g.err.Error(), "mst auth drive") {
			t.Errorf("drive: %+v, want the coordinator's reason", g)
		}

		// A fresh value replaces the refusal.
		k.receive(&protocol.Tokens{Values: map[string]string{"MST_OAUTH_DRIVE": "access-token-drive-2"}, Expires: map[string]time.Time{"MST_OAUTH_DRIVE": time.Now().Add(time.Minute)}})
		if v, err := k.bearer(t.Context(), "MST_OAUTH_DRIVE"); err != nil || v != "access-token-drive-2" {
			t.Errorf("drive after a fresh value: %q, %v", v, err)
		}
		// The worker asks again before it expires; when it has expired
		// with the answer still out, bearer waits for the answer.
		time.Sleep(time.Minute + time.Second) // synctest's fake clock: no real wait
		synctest.Wait()
		if len(asked) != 1 || asked[0] != "MST_OAUTH_DRIVE" {
			t.Errorf("asked again for %q, want MST_OAUTH_DRIVE", asked)
		}
		late := wait("MST_OAUTH_DRIVE")
		synctest.Wait()
		select {
		case g := <-late:
			t.Fatalf("bearer returned %+v while a fresh value was asked for; want it to wait", g)
		default:
		}
		k.receive(&protocol.Tokens{Errors: map[string]string{"MST_OAUTH_DRIVE": "the refresh failed"}})
		if g := <-late; g.err == nil || g.err.Error() != "the refresh failed" {
			t.Errorf("drive after a failed refresh: %+v, want the reason", g)
		}

		// Never asked for: no wait.
		if _, err := k.bearer(t.Context(), "MST_OAUTH_OTHER"); err == nil {
			t.Error("a name never asked for: want an error at once")
		}
		// Asked for, never answered: bearer ends with its ctx.
		k.expect([]string{"MST_OAUTH_SLOW"})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if _, err := k.bearer(ctx, "MST_OAUTH_SLOW"); err == nil || !strings.Contains(err.Error(), "waiting") {
			t.Errorf("an unanswered name: %v, want the wait's end", err)
		}
	})
}
