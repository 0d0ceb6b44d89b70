// Package credstore keeps the OAuth grants of connector servers: what
// `mst auth SERVER` obtains (a client registration and a token with its
// refresh token), so that a run's coordinator can mint access tokens for
// its workers. Grants stay with the coordinator; a worker only ever gets
// short-lived access tokens.
//
// A credential store is an extension kind. Each kind is a Definition in a
// Registry, picked by name (--store NAME); Definition.Shared says whether
// other machines reach the same grants, which a detached run needs. The
// built-in kind is "local" (LocalDefinition): grants encrypted at rest in
// a folder of this machine, not shared. Every store passes the conformance
// suite in credstore/credstoretest.
//
// A refresh reads a grant, asks the authorization server for a new token
// and stores it; providers that rotate refresh tokens invalidate the old
// one at that moment. Store.WithLock holds a lock across the processes of
// one machine around those three steps, so two refreshes of one grant never
// interleave and a rotated refresh token is never lost.
package credstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/oauth2"
)

// Grant is what a store keeps for one connector server.
type Grant struct {
	// Server is the connector server's name in the eval config: any
	// non-empty string of valid UTF-8. A store keeps one grant per name.
	Server string `json:"server"`
	// Resource is the server's URL, the OAuth resource the token is for.
	Resource string `json:"resource,omitempty"`
	// Issuer and TokenEndpoint name the authorization server, from its
	// metadata; refreshes go to TokenEndpoint.
	Issuer        string `json:"issuer,omitempty"`
	TokenEndpoint string `json:"token_endpoint,omitempty"`
	// ClientID is MST's client at the authorization server, registered
	// dynamically or beforehand. ClientSecret is set only for a
	// confidential client.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes are the scopes granted.
	Scopes []string `json:"scopes,omitempty"`
	// Token is the access token, its refresh token, type and expiry. A
	// token's extra fields from the token response (Token.Extra) are not
	// kept.
	Token *oauth2.Token `json:"token,omitempty"`
	// Granted is when `mst auth` obtained the grant; Refreshed when its
	// token was last refreshed (zero: never).
	Granted   time.Time `json:"granted,omitzero"`
	Refreshed time.Time `json:"refreshed,omitzero"`
	// Listed is set only on the grants Store.List returns, which carry no
	// secret value: it says which ones the stored grant holds. Put refuses
	// a grant with Listed set, so a listing written back can never erase
	// a token.
	Listed *Listed `json:"listed,omitempty"`
}

// Listed says which secret values a stored grant holds, for a listing
// that shows none of them.
type Listed struct {
	AccessToken  bool `json:"access_token"`
	RefreshToken bool `json:"refresh_token"`
	ClientSecret bool `json:"client_secret"`
}

// Listing returns g as a listing shows it: the access token, refresh token
// and client secret left out, Listed saying which of them g holds. The
// token keeps its type and expiry. Stores build their List with it.
func (g Grant) Listing() Grant {
	out := g
	out.Scopes = slices.Clone(g.Scopes)
	out.ClientSecret = ""
	out.Listed = &Listed{ClientSecret: g.ClientSecret != ""}
	if g.Token != nil {
		out.Listed.AccessToken = g.Token.AccessToken != ""
		out.Listed.RefreshToken = g.Token.RefreshToken != ""
		out.Token = &oauth2.Token{TokenType: g.Token.TokenType, Expiry: g.Token.Expiry, ExpiresIn: g.Token.ExpiresIn}
	}
	return out
}

// Check says why a store cannot keep g: a bad server name, or g comes
// from a listing. Stores call it first thing in Put.
func (g Grant) Check() error {
	if err := CheckServer(g.Server); err != nil {
		return err
	}
	if g.Listed != nil {
		return fmt.Errorf("the grant for server %q comes from a listing, which holds no tokens; storing it would erase them: Put the grant from Get instead", g.Server)
	}
	return nil
}

// CheckServer says why name cannot name a server's grant: it must be a
// non-empty string of valid UTF-8. Any such string works, slashes, dots
// and all; stores never use it as a path as it is.
func CheckServer(name string) error {
	if name == "" {
		return errors.New("a grant needs a server name; got an empty one")
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("server name %q is not valid UTF-8; name the server in the eval config with UTF-8 text", name)
	}
	return nil
}

// ErrNotFound is wrapped by the error of Get and Delete when a store holds
// no grant for the server.
var ErrNotFound = errors.New("no grant stored")

// Store keeps grants by server name. Its methods may be called from many
// goroutines and processes at once.
type Store interface {
	// Get returns the grant for server, with every value Put stored. The
	// error wraps ErrNotFound when there is none.
	Get(ctx context.Context, server string) (Grant, error)
	// Put stores g under g.Server, replacing any grant there whole:
	// a Get that runs at the same time sees the old grant or the new one.
	// It refuses what g.Check refuses.
	Put(ctx context.Context, g Grant) error
	// Delete removes the grant for server. The error wraps ErrNotFound
	// when there is none.
	Delete(ctx context.Context, server string) error
	// List returns every grant as Grant.Listing shows it (no token value,
	// no client secret), sorted by server name. When some stored grant
	// cannot be read, List returns the others and an error naming each
	// that could not.
	List(ctx context.Context) ([]Grant, error)
	// WithLock calls fn while holding server's lock, which excludes every
	// other WithLock for the same server and store on this machine, in
	// this process or another. A refresh runs inside it: Get, refresh,
	// Put. The lock does not hold across machines, even for a shared
	// store. Get, Put and Delete take no lock of their own.
	//
	// When the lock is held elsewhere, WithLock calls the LockWaiting its
	// store was opened with (Params) once and then waits, until the lock is free or ctx ends (it
	// then returns ctx's error without calling fn). fn gets a ctx in which
	// WithLock for the same server runs fn at once, so a refresh may call
	// code that locks again; that ctx is only good during fn. WithLock
	// returns fn's error.
	WithLock(ctx context.Context, server string, fn func(ctx context.Context) error) error
}

// shellQuote returns s as one word for a POSIX shell, for commands in
// messages: unchanged when it is plain, in single quotes otherwise.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+=,", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
