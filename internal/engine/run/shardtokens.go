package run

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/mst-eval/mst/credstore"
	"github.com/mst-eval/mst/internal/engine/shard"
	"github.com/mst-eval/mst/protocol"
)

// The coordinator hands connector servers' access tokens to workers
// (need-tokens / tokens) from the credential store: this adapter is the
// only place where the protocol and the store meet.

// shardTokens is a coordinator's token source over t. names maps
// each token name workers know (as in protocol.Tokens.Values) to the
// connector server whose access token it is; a server in a request's
// Servers gets its token under each name that maps to it. Names and
// servers it does not know are left out. A server whose token cannot be
// had is logged, and each of its names comes back Refused with the reason
// (which names the server and the `mst auth` command that mends a refused
// grant, and holds no secret).
type shardTokens struct {
	t     *credstore.Tokens
	names map[string]string
	log   *slog.Logger
}

func (s shardTokens) Tokens(ctx context.Context, req protocol.NeedTokens) (map[string]shard.Token, error) {
	want := map[string][]string{} // server -> token names
	for _, name := range req.Names {
		if server, ok := s.names[name]; ok && !slices.Contains(want[server], name) {
			want[server] = append(want[server], name)
		}
	}
	for _, server := range req.Servers {
		for _, name := range slices.Sorted(maps.Keys(s.names)) {
			if s.names[name] == server && !slices.Contains(want[server], name) {
				want[server] = append(want[server], name)
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	// A server whose token a worker saw rejected gets a new one.
	rejected := map[string]bool{}
	for _, name := range req.Rejected {
		if server, ok := s.names[name]; ok && slices.Contains(req.Names, name) {
			rejected[server] = true
		}
	}
	out := map[string]shard.Token{}
	for _, server := range slices.Sorted(maps.Keys(want)) {
		var access string
		var expires time.Time
		var err error
		if rejected[server] {
			access, expires, err = s.t.Replace(ctx, server, s.current(ctx, server))
		} else {
			access, expires, err = s.t.Token(ctx, server)
		}
		tok := shard.Token{Value: access, Expires: expires}
		if err != nil {
			s.log.Warn("no access token for a worker", "server", server, "err", err)
			tok = shard.Token{Refused: err.Error()}
		}
		for _, name := range want[server] {
			out[name] = tok
		}
	}
	return out, nil
}

// current is the access token the store holds for server now, "" when
// there is none: what a worker that saw its token rejected was handed
// last (or a newer one, which Replace then hands out as it is).
func (s shardTokens) current(ctx context.Context, server string) string {
	g, err := s.t.Store.Get(ctx, server)
	if err != nil || g.Token == nil {
		return ""
	}
	return g.Token.AccessToken
}
