package protocol

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/mst-eval/mst/transcript"
)

// Protocol is the name and version of the protocol, sent in hello.
const Protocol = "mst.shard/v1"

// Message types. Worker to coordinator: hello, acquire, acquire-call,
// release-call, need-tokens, trial (collect shards), graded (grade shards),
// heartbeat, done. Coordinator to worker: granted, call-granted, tokens,
// cancel.
const (
	TypeHello       = "hello"
	TypeAcquire     = "acquire"
	TypeAcquireCall = "acquire-call"
	TypeReleaseCall = "release-call"
	TypeNeedTokens  = "need-tokens"
	TypeTrial       = "trial"
	TypeGraded      = "graded"
	TypeHeartbeat   = "heartbeat"
	TypeDone        = "done"
	TypeGranted     = "granted"
	TypeCallGranted = "call-granted"
	TypeTokens      = "tokens"
	TypeCancel      = "cancel"
)

// Hello is the worker's first message. The coordinator refuses a worker
// whose Protocol or MSTVersion differs from its own, or whose machine
// (OS) cannot run the shard's clients, before any server starts.
type Hello struct {
	Protocol   string `json:"protocol"`
	MSTVersion string `json:"mstVersion"`
	Shard      int    `json:"shard"`
	// ImageDigest identifies the machine image the worker runs in
	// (NAME@sha256:…), when its runner said (ImageDigestEnv).
	ImageDigest string `json:"imageDigest,omitempty"`
	// ClientVersions maps client name to the version of the program the
	// shard's variants run (the one their clientOptions name), as the
	// worker found it on its machine; CLIENT@VARIANT, one per variant,
	// when a client's variants run different versions.
	ClientVersions map[string]string `json:"clientVersions,omitempty"`
	// Plugins are the worker's plugins, namespace to version: its Go
	// plugins, and the program plugins its bundle names. The coordinator
	// refuses a worker whose plugins are not its bundle's Plugins.
	Plugins map[string]string `json:"plugins,omitempty"`
	OS      string            `json:"os"`
	Arch    string            `json:"arch"`
}

// Acquire asks for room to run one trial under the eval's limits. The worker
// waits for Granted with the same ID before it sends the prompt.
type Acquire struct {
	ID        int64          `json:"id"`
	Key       transcript.Key `json:"key"`
	Providers []string       `json:"providers,omitempty"`
	Servers   []string       `json:"servers,omitempty"`
}

// AcquireCall asks for a place for one tool call to a server whose calls
// the eval limits across shards (limits.serverCalls). The worker sends it
// before the call reaches the server, waits for CallGranted with the same
// ID, and sends ReleaseCall with that ID when the call ends. Call IDs are
// numbered on their own, apart from the IDs of Acquire.
type AcquireCall struct {
	ID     int64  `json:"id"`
	Server string `json:"server"`
}

// ReleaseCall gives back the place a granted AcquireCall took.
type ReleaseCall struct {
	ID int64 `json:"id"`
}

// CallGranted answers an AcquireCall: the call may go to its server,
// unless Refused is set.
type CallGranted struct {
	ID int64 `json:"id"`
	// Refused, when set, says why the coordinator will not count the call
	// (a server the shard's variants do not use): the call must not reach
	// the server, and no ReleaseCall follows.
	Refused string `json:"refused,omitempty"`
}

// NeedTokens asks the coordinator for fresh access tokens: the tokens of
// the servers in Servers, and the tokens named in Names (a worker asks for
// a token it holds by name before that token expires). The coordinator
// answers with a Tokens message, with a value or, under Errors, why not
// for each name it knows.
type NeedTokens struct {
	Servers []string `json:"servers,omitempty"`
	// Names are token names, as in Tokens.Values.
	Names []string `json:"names,omitempty"`
	// Rejected are names among Names whose current value the server
	// refused (HTTP 401) although it had not expired: the coordinator gets
	// a new one even though the old one looks fresh.
	Rejected []string `json:"rejected,omitempty"`
}

// Trial reports that a trial ended and its transcript was written. It gives
// back the room its Acquire took.
type Trial struct {
	// Acquire is the ID of the granted Acquire this trial ran under. The
	// coordinator refuses a trial without one (see docs/protocol.md,
	// Refused messages).
	Acquire int64          `json:"acquire,omitempty"`
	Key     transcript.Key `json:"key"`
	Status  string         `json:"status"`
	Cause   string         `json:"cause,omitempty"`
	// Path is the transcript's path relative to the worker's results, as
	// its store names it (under transcripts/, names path-escaped). The
	// coordinator fetches no other shape of path.
	Path       string  `json:"path"`
	DurationMs float64 `json:"durationMs"`
}

// Graded reports that a grade shard graded one trial and wrote its grade.
// It gives back the room its Acquire took (the room of the judges'
// providers, under limits.providers).
type Graded struct {
	// Acquire is the ID of the granted Acquire the trial was graded under.
	Acquire int64          `json:"acquire,omitempty"`
	Key     transcript.Key `json:"key"`
	// Path is the grade's path relative to the worker's results: grades/
	// and then the trial's transcript path (GradePath). It is "" when the
	// worker could not grade the trial (the run was cancelled mid-way, or
	// the grade could not be written): the trial stays ungraded, and
	// mst grade --resume grades it.
	Path       string  `json:"path,omitempty"`
	DurationMs float64 `json:"durationMs"`
}

// Heartbeat tells the coordinator the worker is alive: from its start
// (before hello, while it asks its clients' programs for their versions)
// until its last trial ends.
type Heartbeat struct {
	InFlight int `json:"inFlight"`
	Done     int `json:"done"`
}

// Done is the worker's last message.
type Done struct {
	Counts transcript.Counts `json:"counts"`
	// CleanupOK is false when closing a client or server failed.
	CleanupOK bool `json:"cleanupOk"`
	// Error is set when the shard could not run (a failed readiness check).
	Error string `json:"error,omitempty"`
}

// Granted answers an Acquire.
type Granted struct {
	ID int64 `json:"id"`
	// Skip, when set, says the trial must not run and why (its variant
	// was stopped, see Gate): the worker opens no client, stores a
	// transcript with the outcome skipped and this text as its detail,
	// and reports it with a Trial message as usual. A skip grant holds no
	// room under the limits. A coordinator older than this field never
	// sends it.
	Skip string `json:"skip,omitempty"`
}

// Tokens hands the worker access tokens and secret values, by name. The
// worker keeps them in memory and in a memory-backed folder only, and
// redacts every one from what it writes. A name sent again replaces its
// value; the old value stays redacted.
type Tokens struct {
	Values map[string]string `json:"values"`
	// Expires gives, for a name in Values, when its value stops working.
	// A name without an entry does not expire. A worker asks for a fresh
	// value (NeedTokens) before that time and drops the value at it.
	Expires map[string]time.Time `json:"expires,omitempty"`
	// Errors says, for a token the worker asked for and did not get, why
	// not, in words fit for a trial's error (no value in them): a refused
	// OAuth grant, say, with the command that mends it. A later value of
	// the name replaces its error.
	Errors map[string]string `json:"errors,omitempty"`
}

// tokensWire is Tokens as JSON: a value that is not valid UTF-8 (a secret
// is any bytes) cannot be a JSON string without being changed, so it goes
// base64-encoded under binary instead of values.
type tokensWire struct {
	Values  map[string]string    `json:"values"`
	Binary  map[string]string    `json:"binary,omitempty"`
	Expires map[string]time.Time `json:"expires,omitempty"`
	Errors  map[string]string    `json:"errors,omitempty"`
}

// MarshalJSON writes the values that are not valid UTF-8 under binary.
func (t Tokens) MarshalJSON() ([]byte, error) {
	w := tokensWire{Values: map[string]string{}, Expires: t.Expires, Errors: t.Errors}
	for k, v := range t.Values {
		if utf8.ValidString(v) {
			w.Values[k] = v
			continue
		}
		if w.Binary == nil {
			w.Binary = map[string]string{}
		}
		w.Binary[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads values and binary into Values.
func (t *Tokens) UnmarshalJSON(b []byte) error {
	var w tokensWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t.Values, t.Expires, t.Errors = w.Values, w.Expires, w.Errors
	if t.Values == nil && len(w.Binary) > 0 {
		t.Values = map[string]string{}
	}
	for k, v := range w.Binary {
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("binary.%s: not base64: %w", k, err)
		}
		t.Values[k] = string(raw)
	}
	return nil
}

// Cancel asks the worker to stop: trials in flight end as cancelled and no
// new trial starts.
type Cancel struct {
	Reason string `json:"reason,omitempty"`
}

// envelope is a message on the wire: its type plus its fields, flat.
type envelope struct {
	Type string `json:"type"`
}

// messageType returns the wire type of a message value.
func messageType(m any) string {
	switch m.(type) {
	case *Hello:
		return TypeHello
	case *Acquire:
		return TypeAcquire
	case *AcquireCall:
		return TypeAcquireCall
	case *ReleaseCall:
		return TypeReleaseCall
	case *CallGranted:
		return TypeCallGranted
	case *NeedTokens:
		return TypeNeedTokens
	case *Trial:
		return TypeTrial
	case *Graded:
		return TypeGraded
	case *Heartbeat:
		return TypeHeartbeat
	case *Done:
		return TypeDone
	case *Granted:
		return TypeGranted
	case *Tokens:
		return TypeTokens
	case *Cancel:
		return TypeCancel
	}
	return ""
}

// newMessage returns a zero message for a wire type.
func newMessage(typ string) any {
	switch typ {
	case TypeHello:
		return new(Hello)
	case TypeAcquire:
		return new(Acquire)
	case TypeAcquireCall:
		return new(AcquireCall)
	case TypeReleaseCall:
		return new(ReleaseCall)
	case TypeCallGranted:
		return new(CallGranted)
	case TypeNeedTokens:
		return new(NeedTokens)
	case TypeTrial:
		return new(Trial)
	case TypeGraded:
		return new(Graded)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeDone:
		return new(Done)
	case TypeGranted:
		return new(Granted)
	case TypeTokens:
		return new(Tokens)
	case TypeCancel:
		return new(Cancel)
	}
	return nil
}
