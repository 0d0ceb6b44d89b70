// Package atspi drives desktop apps through the Linux accessibility bus
// (AT-SPI 2 over D-Bus): it finds an app and its controls by role and
// name, types into text fields, presses buttons, reads text, and waits for
// what the apps announce on the bus. It knows nothing of any particular
// app; package desktop's profiles say which controls an app has.
//
// The accessibility bus is a D-Bus bus of its own, separate from the
// session bus: the session bus's org.a11y.Bus service (at-spi2-core's bus
// launcher, started on demand) gives its address. Every accessible app
// registers its root with org.a11y.atspi.Registry there, and each node of
// its tree is an object (bus name and path) with the Accessible interface
// and, as it applies, Text, EditableText and Action.
//
// Apps send events only while some listener has asked the registry for
// them, so Watch registers for object and window events before it
// listens.
package atspi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// D-Bus names of the AT-SPI services and interfaces used here.
const (
	a11yBusName    = "org.a11y.Bus"
	a11yBusPath    = "/org/a11y/bus"
	registryName   = "org.a11y.atspi.Registry"
	registryPath   = "/org/a11y/atspi/registry"
	rootPath       = "/org/a11y/atspi/accessible/root"
	ifAccessible   = "org.a11y.atspi.Accessible"
	ifText         = "org.a11y.atspi.Text"
	ifEditableText = "org.a11y.atspi.EditableText"
	ifAction       = "org.a11y.atspi.Action"
	ifRegistry     = "org.a11y.atspi.Registry"
	ifEventObject  = "org.a11y.atspi.Event.Object"
	ifEventWindow  = "org.a11y.atspi.Event.Window"
)

// callLimit bounds one call to an app: an app whose main loop is stuck
// never answers, and the caller's context may allow minutes.
const callLimit = 10 * time.Second

// backstop is how often Until checks again when no event came: an app
// may change without announcing it (a process that exits announces
// nothing), so events make a wait quick and the backstop makes it sure.
const backstop = time.Second

// Bus is a connection to one desktop session's accessibility bus. It is
// safe for concurrent use.
type Bus struct {
	conn *dbus.Conn

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each event
	events  uint64
	watched bool
	done    chan struct{}
}

// Connect asks the session bus at sessionAddr (a D-Bus address such as
// DBUS_SESSION_BUS_ADDRESS holds; "" means that variable) for the
// accessibility bus and connects to it.
func Connect(ctx context.Context, sessionAddr string) (*Bus, error) {
	var (
		session *dbus.Conn
		err     error
	)
	if sessionAddr == "" {
		session, err = dbus.ConnectSessionBus(dbus.WithContext(ctx))
	} else {
		session, err = dbus.Connect(sessionAddr, dbus.WithContext(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the desktop session's D-Bus (DBUS_SESSION_BUS_ADDRESS): %w", err)
	}
	defer session.Close()
	cctx, cancel := context.WithTimeout(ctx, callLimit+callLimit)
	defer cancel()
	var addr string
	if err := session.Object(a11yBusName, a11yBusPath).CallWithContext(cctx, a11yBusName+".GetAddress", 0).Store(&addr); err != nil {
		return nil, fmt.Errorf("asking the session bus for the accessibility bus (%s.GetAddress; is at-spi2-core installed?): %w", a11yBusName, err)
	}
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("connecting to the accessibility bus: %w", err)
	}
	return &Bus{conn: conn, changed: make(chan struct{}), done: make(chan struct{})}, nil
}

// Close ends the connection.
func (b *Bus) Close() error {
	b.mu.Lock()
	select {
	case <-b.done:
	default:
		close(b.done)
	}
	b.mu.Unlock()
	return b.conn.Close()
}

// Watch asks the registry for the apps' object and window events and
// starts counting them, so Until wakes at each. Calling it again does
// nothing.
func (b *Bus) Watch(ctx context.Context) error {
	b.mu.Lock()
	if b.watched {
		b.mu.Unlock()
		return nil
	}
	b.watched = true
	b.mu.Unlock()
	for _, iface := range []string{ifEventObject, ifEventWindow} {
		if err := b.conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(iface)); err != nil {
			return fmt.Errorf("subscribing to %s: %w", iface, err)
		}
	}
	ch := make(chan *dbus.Signal, 256)
	b.conn.Signal(ch)
	go b.count(ch)
	reg := b.conn.Object(registryName, registryPath)
	for _, ev := range []string{"object:", "window:"} {
		cctx, cancel := context.WithTimeout(ctx, callLimit)
		// at-spi2-core 2.46 takes the event, the properties wanted with
		// it and an app to restrict it to; older ones the event alone.
		err := reg.CallWithContext(cctx, ifRegistry+".RegisterEvent", 0, ev, []string{}, "").Err
		if err != nil {
			err = reg.CallWithContext(cctx, ifRegistry+".RegisterEvent", 0, ev).Err
		}
		cancel()
		if err != nil {
			return fmt.Errorf("registering for %s events with the accessibility registry: %w", ev, err)
		}
	}
	return nil
}

func (b *Bus) count(ch chan *dbus.Signal) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
			b.mu.Lock()
			b.events++
			close(b.changed)
			b.changed = make(chan struct{})
			b.mu.Unlock()
		case <-b.done:
			return
		}
	}
}

// Events is how many events have come since Watch.
func (b *Bus) Events() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.events
}

// Until calls check until it reports true or fails, again at each event
// on the bus (Watch must have been called for events to count) and at
// least every second, and returns ctx's error when ctx ends first.
func (b *Bus) Until(ctx context.Context, check func(context.Context) (bool, error)) error {
	t := time.NewTimer(backstop)
	defer t.Stop()
	for {
		b.mu.Lock()
		changed := b.changed
		b.mu.Unlock()
		ok, err := check(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		t.Reset(backstop)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Node is one object in an app's accessibility tree.
type Node struct {
	bus  *Bus
	Dest string          // the app's unique bus name
	Path dbus.ObjectPath // the object's path in the app
}

func (n Node) String() string { return n.Dest + string(n.Path) }

// Valid reports whether n names an object.
func (n Node) Valid() bool { return n.bus != nil && n.Dest != "" }

func (n Node) call(ctx context.Context, method string, args ...any) *dbus.Call {
	cctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	return n.bus.conn.Object(n.Dest, n.Path).CallWithContext(cctx, method, 0, args...)
}

// Apps lists the apps registered on the bus (the desktop root's children).
func (b *Bus) Apps(ctx context.Context) ([]Node, error) {
	return Node{bus: b, Dest: registryName, Path: rootPath}.Children(ctx)
}

// objectRef is AT-SPI's (so) reference to an object.
type objectRef struct {
	Dest string
	Path dbus.ObjectPath
}

// Children lists n's children.
func (n Node) Children(ctx context.Context) ([]Node, error) {
	var refs []objectRef
	if err := n.call(ctx, ifAccessible+".GetChildren").Store(&refs); err != nil {
		return nil, n.wrap("listing the children of", err)
	}
	out := make([]Node, 0, len(refs))
	for _, r := range refs {
		if r.Dest == "" || r.Path == "/org/a11y/atspi/null" {
			continue
		}
		out = append(out, Node{bus: n.bus, Dest: r.Dest, Path: r.Path})
	}
	return out, nil
}

// Name is n's accessible name (a window's title, a button's label, or the
// name an app gave a control).
func (n Node) Name(ctx context.Context) (string, error) {
	var v dbus.Variant
	if err := n.call(ctx, "org.freedesktop.DBus.Properties.Get", ifAccessible, "Name").Store(&v); err != nil {
		return "", n.wrap("reading the name of", err)
	}
	s, _ := v.Value().(string)
	return s, nil
}

// ID is n's AccessibleId: a name the app gave the control for automation,
// "" when it gave none or the bus is older than at-spi2-core 2.34.
func (n Node) ID(ctx context.Context) (string, error) {
	var v dbus.Variant
	if err := n.call(ctx, "org.freedesktop.DBus.Properties.Get", ifAccessible, "AccessibleId").Store(&v); err != nil {
		var de dbus.Error
		if errors.As(err, &de) && de.Name == "org.freedesktop.DBus.Error.InvalidArgs" {
			return "", nil // no such property on this bus
		}
		return "", n.wrap("reading the id of", err)
	}
	s, _ := v.Value().(string)
	return s, nil
}

// Role is n's role as AT-SPI names it ("push button", "text", "frame").
func (n Node) Role(ctx context.Context) (string, error) {
	var s string
	if err := n.call(ctx, ifAccessible+".GetRoleName").Store(&s); err != nil {
		return "", n.wrap("reading the role of", err)
	}
	return s, nil
}

// States is n's state set.
func (n Node) States(ctx context.Context) (States, error) {
	var words []uint32
	if err := n.call(ctx, ifAccessible+".GetState").Store(&words); err != nil {
		return 0, n.wrap("reading the state of", err)
	}
	var s States
	for i, w := range words {
		if i < 2 {
			s |= States(w) << (32 * i)
		}
	}
	return s, nil
}

// Text is the whole of n's text (Text interface).
func (n Node) Text(ctx context.Context) (string, error) {
	var s string
	if err := n.call(ctx, ifText+".GetText", int32(0), int32(-1)).Store(&s); err != nil {
		return "", n.wrap("reading the text of", err)
	}
	return s, nil
}

// SetText replaces n's text (EditableText interface), as typing would.
func (n Node) SetText(ctx context.Context, text string) error {
	var ok bool
	if err := n.call(ctx, ifEditableText+".SetTextContents", text).Store(&ok); err != nil {
		return n.wrap("typing into", err)
	}
	if !ok {
		return fmt.Errorf("typing into %s: the app refused the text (is the field read-only or disabled?)", n)
	}
	return nil
}

// Press runs n's first action (a button's click).
func (n Node) Press(ctx context.Context) error {
	var ok bool
	if err := n.call(ctx, ifAction+".DoAction", int32(0)).Store(&ok); err != nil {
		return n.wrap("pressing", err)
	}
	if !ok {
		return fmt.Errorf("pressing %s: the app refused the action", n)
	}
	return nil
}

// PID is the process id of the app n belongs to, as the bus knows it.
func (n Node) PID(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	var pid uint32
	err := n.bus.conn.BusObject().CallWithContext(cctx, "org.freedesktop.DBus.GetConnectionUnixProcessID", 0, n.Dest).Store(&pid)
	if err != nil {
		return 0, n.wrap("finding the process of", err)
	}
	return int(pid), nil
}

// ErrGone is wrapped by errors about an app that left the bus (it exited
// or crashed) or an object it no longer has.
var ErrGone = errors.New("the app or the control is gone")

func (n Node) wrap(doing string, err error) error {
	var de dbus.Error
	if errors.As(err, &de) {
		switch de.Name {
		case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
			"org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownMethod",
			"org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
			return fmt.Errorf("%s %s: %w (%v)", doing, n, ErrGone, err)
		}
	}
	return fmt.Errorf("%s %s: %w", doing, n, err)
}

// States is a set of AT-SPI states, one bit each.
type States uint64

// The states MST reads (AtspiStateType's values).
const (
	StateActive    = 1
	StateEditable  = 7
	StateEnabled   = 8
	StateFocused   = 12
	StateModal     = 16
	StateSensitive = 24
	StateShowing   = 25
	StateVisible   = 30
)

// Has reports whether state s is in the set.
func (s States) Has(state int) bool { return s&(1<<state) != 0 }

// Match says which nodes a search wants: Role, Name and ID must equal
// the node's when set ("" matches any). ID is the AT-SPI AccessibleId
// property (at-spi2-core 2.34 and later), a name for the control that
// does not change with what it shows: a status label's name is its text.
type Match struct {
	Role string `json:"role,omitempty"`
	Name string `json:"name,omitempty"`
	ID   string `json:"id,omitempty"`
}

func (m Match) String() string {
	var parts []string
	if m.Role != "" {
		parts = append(parts, m.Role)
	}
	if m.Name != "" {
		parts = append(parts, fmt.Sprintf("%q", m.Name))
	}
	if m.ID != "" {
		parts = append(parts, "#"+m.ID)
	}
	if len(parts) == 0 {
		return "node"
	}
	return strings.Join(parts, " ")
}

// maxNodes bounds a search: a chat app's tree is hundreds of nodes; a
// tree past this is a list the search should not walk (a long
// conversation's rows).
const maxNodes = 20000

// ErrNotFound is wrapped by Find's error when no node matches.
var ErrNotFound = errors.New("not found")

// Find returns the first node under n (n included), depth first, that
// matches m.
func (n Node) Find(ctx context.Context, m Match) (Node, error) {
	found, err := n.find(ctx, m, 1)
	if err != nil {
		return Node{}, err
	}
	if len(found) == 0 {
		return Node{}, fmt.Errorf("no %s under %s: %w", m, n, ErrNotFound)
	}
	return found[0], nil
}

// FindAll returns every node under n (n included) that matches m, in
// depth-first order.
func (n Node) FindAll(ctx context.Context, m Match) ([]Node, error) {
	return n.find(ctx, m, 0)
}

func (n Node) find(ctx context.Context, m Match, limit int) ([]Node, error) {
	var out []Node
	err := n.walk(ctx, func(x Node, _ int) error {
		ok, err := m.matches(ctx, x)
		if err != nil || !ok {
			return err
		}
		out = append(out, x)
		if limit > 0 && len(out) >= limit {
			return errStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walk visits n and the nodes under it, depth first, at most maxNodes of
// them and 64 levels down; visit may end the walk early with errStop.
func (n Node) walk(ctx context.Context, visit func(x Node, depth int) error) error {
	seen := 0
	var step func(x Node, depth int) error
	step = func(x Node, depth int) error {
		if seen++; seen > maxNodes {
			return fmt.Errorf("walking the tree of %s: more than %d nodes", n, maxNodes)
		}
		if err := visit(x, depth); err != nil {
			return err
		}
		if depth > 64 {
			return nil
		}
		kids, err := x.Children(ctx)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := step(k, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := step(n, 0); err != errStop {
		return err
	}
	return nil
}

var errStop = errors.New("stop")

func (m Match) matches(ctx context.Context, n Node) (bool, error) {
	if m.Role != "" {
		r, err := n.Role(ctx)
		if err != nil {
			return false, err
		}
		if r != m.Role {
			return false, nil
		}
	}
	if m.Name != "" {
		name, err := n.Name(ctx)
		if err != nil {
			return false, err
		}
		if name != m.Name {
			return false, nil
		}
	}
	if m.ID != "" {
		id, err := n.ID(ctx)
		if err != nil {
			return false, err
		}
		if id != m.ID {
			return false, nil
		}
	}
	return true, nil
}

// App returns the registered app whose accessible name is name (GTK
// names an app after its program: "app.py", "claude-desktop"), or an
// error wrapping ErrNotFound. When several match, the last registered
// wins: after a restart, the old one may linger for a moment.
func (b *Bus) App(ctx context.Context, name string) (Node, error) {
	apps, err := b.Apps(ctx)
	if err != nil {
		return Node{}, err
	}
	var names []string
	for i := len(apps) - 1; i >= 0; i-- {
		got, err := apps[i].Name(ctx)
		if err != nil {
			if errors.Is(err, ErrGone) {
				continue // it left while we looked
			}
			return Node{}, err
		}
		if got == name {
			return apps[i], nil
		}
		names = append(names, fmt.Sprintf("%q", got))
	}
	on := "none"
	if len(names) > 0 {
		on = strings.Join(names, ", ")
	}
	return Node{}, fmt.Errorf("no app named %q on the accessibility bus (registered: %s): %w", name, on, ErrNotFound)
}

// Dump writes n's tree as indented "role "name"" lines, for diagnoses and
// for writing a profile.
func (n Node) Dump(ctx context.Context, maxLines int) (string, error) {
	var sb strings.Builder
	lines := 0
	err := n.walk(ctx, func(x Node, depth int) error {
		if lines >= maxLines {
			return errStop
		}
		lines++
		role, err := x.Role(ctx)
		if err != nil {
			return err
		}
		name, err := x.Name(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s%s %q\n", strings.Repeat("  ", depth), role, name)
		return nil
	})
	return sb.String(), err
}
