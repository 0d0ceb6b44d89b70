package computeruse

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
)

// This file holds the parts of the macOS screen that do not need macOS:
// the geometry, the translation of an Action into the low-level events
// that inputScript posts, and the scripts themselves. screen_darwin.go
// runs them.

// MacOptions configures NewMacScreen.
type MacOptions struct {
	// MaxWidth and MaxHeight bound the size the planner sees; the main
	// display is scaled down, keeping its aspect ratio, to fit. Zero means
	// 1280 and 800 (WXGA), the largest size Anthropic recommends for
	// Computer Use.
	MaxWidth, MaxHeight int
	// Logger receives a debug line per script run; nil discards them.
	Logger *slog.Logger
}

// macGeometry maps the planner's pixels to the main display's points, the
// coordinate space of CoreGraphics events.
type macGeometry struct {
	// width and height are the planner's size.
	width, height int
	// pointsW and pointsH are the main display's size in points.
	pointsW, pointsH float64
}

// newGeometry scales a display of pointsW×pointsH points down to fit
// maxW×maxH, keeping its aspect ratio; it never scales up.
func newGeometry(pointsW, pointsH float64, maxW, maxH int) (macGeometry, error) {
	if pointsW < 1 || pointsH < 1 || math.IsNaN(pointsW) || math.IsNaN(pointsH) {
		return macGeometry{}, fmt.Errorf("the main display measures %vx%v points", pointsW, pointsH)
	}
	if maxW <= 0 {
		maxW = 1280
	}
	if maxH <= 0 {
		maxH = 800
	}
	scale := min(1, float64(maxW)/pointsW, float64(maxH)/pointsH)
	return macGeometry{
		width:   max(1, int(math.Round(pointsW*scale))),
		height:  max(1, int(math.Round(pointsH*scale))),
		pointsW: pointsW,
		pointsH: pointsH,
	}, nil
}

// point maps a pixel to the point at its center, in display points.
func (g macGeometry) point(x, y int) (float64, float64) {
	sx, sy := g.pointsW/float64(g.width), g.pointsH/float64(g.height)
	px := math.Min((float64(x)+0.5)*sx, g.pointsW-0.5)
	py := math.Min((float64(y)+0.5)*sy, g.pointsH-0.5)
	return math.Round(px*100) / 100, math.Round(py*100) / 100
}

// macEvent is one low-level step of inputScript, sent as JSON.
type macEvent struct {
	// E is the step: "mouse", "key", "scroll", "keystroke" (System Events
	// types Text), "paste" (Text goes on the clipboard, whose old text is
	// kept), "restore" (the kept text goes back) or "sleep".
	E string `json:"e"`
	// Type is the CGEventType of a mouse event.
	Type int `json:"type"`
	// X and Y are a mouse event's location, in points.
	X float64 `json:"x"`
	Y float64 `json:"y"`
	// Button is a mouse event's CGMouseButton: 0 left, 1 right, 2 center.
	Button int `json:"button"`
	// Clicks is a mouse button event's click count (kCGMouseEventClickState).
	Clicks int `json:"clicks"`
	// Code and Down are a key event's virtual key code and direction.
	Code int  `json:"code"`
	Down bool `json:"down"`
	// Flags are the CGEventFlags set on a mouse or key event.
	Flags uint64 `json:"flags"`
	// DX and DY are a scroll's wheel clicks: positive is right and down.
	DX int `json:"dx"`
	DY int `json:"dy"`
	// Text is typed or pasted.
	Text string `json:"text,omitempty"`
	// Ms is how long a sleep lasts.
	Ms int `json:"ms"`
}

// CGEventTypes of mouse events.
const (
	evLeftDown    = 1
	evLeftUp      = 2
	evRightDown   = 3
	evRightUp     = 4
	evMouseMoved  = 5
	evLeftDragged = 6
	evOtherDown   = 25
	evOtherUp     = 26
)

// Pauses inside an action, in milliseconds: between the events of a
// chord or a click, so apps see them apart, and after a paste, so the app
// has read the clipboard before the old text goes back.
const (
	pauseEvent = 15
	pauseChord = 40
	pausePaste = 250
	dragSteps  = 12
)

// keystrokeMax is the longest text typed with System Events' keystroke;
// longer text, and text with characters outside printable ASCII, is pasted.
const keystrokeMax = 200

// macEvents translates an action into the events that perform it.
// leftHeld says whether the left button is down (after left_mouse_down),
// so that a mouse move drags.
func macEvents(a Action, g macGeometry, leftHeld bool) ([]macEvent, error) {
	x, y := g.point(a.X, a.Y)
	mods, err := parseModifiers(a.Modifiers)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	var ev []macEvent
	mouse := func(typ int, x, y float64, button, clicks int) {
		ev = append(ev, macEvent{E: "mouse", Type: typ, X: x, Y: y, Button: button, Clicks: clicks, Flags: mods.flags})
	}
	pause := func(ms int) { ev = append(ev, macEvent{E: "sleep", Ms: ms}) }
	click := func(down, up, button, count int) {
		mouse(evMouseMoved, x, y, 0, 0)
		ev = append(ev, modsDown(mods)...)
		for n := 1; n <= count; n++ {
			mouse(down, x, y, button, n)
			mouse(up, x, y, button, n)
			if n < count {
				pause(pauseEvent)
			}
		}
		ev = append(ev, modsUp(mods)...)
	}

	switch a.Kind {
	case KindMouseMove:
		if leftHeld {
			mouse(evLeftDragged, x, y, 0, 0)
		} else {
			mouse(evMouseMoved, x, y, 0, 0)
		}
	case KindLeftClick:
		click(evLeftDown, evLeftUp, 0, 1)
	case KindDoubleClick:
		click(evLeftDown, evLeftUp, 0, 2)
	case KindTripleClick:
		click(evLeftDown, evLeftUp, 0, 3)
	case KindRightClick:
		click(evRightDown, evRightUp, 1, 1)
	case KindMiddleClick:
		click(evOtherDown, evOtherUp, 2, 1)
	case KindLeftMouseDown:
		ev = append(ev, modsDown(mods)...)
		mouse(evLeftDown, x, y, 0, 1)
	case KindLeftMouseUp:
		mouse(evLeftUp, x, y, 0, 1)
		ev = append(ev, modsUp(mods)...)
	case KindLeftClickDrag:
		fx, fy := g.point(a.FromX, a.FromY)
		mouse(evMouseMoved, fx, fy, 0, 0)
		ev = append(ev, modsDown(mods)...)
		mouse(evLeftDown, fx, fy, 0, 1)
		for i := 1; i <= dragSteps; i++ {
			t := float64(i) / dragSteps
			pause(pauseEvent)
			mouse(evLeftDragged, round2(fx+(x-fx)*t), round2(fy+(y-fy)*t), 0, 0)
		}
		mouse(evLeftUp, x, y, 0, 1)
		ev = append(ev, modsUp(mods)...)
	case KindScroll:
		mouse(evMouseMoved, x, y, 0, 0)
		ev = append(ev, modsDown(mods)...)
		ev = append(ev, macEvent{E: "scroll", DX: a.ScrollX, DY: a.ScrollY, Flags: mods.flags})
		ev = append(ev, modsUp(mods)...)
	case KindKey, KindHoldKey:
		chords, err := parseKeys(a.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		if a.Kind == KindHoldKey {
			for _, c := range chords {
				ev = append(ev, chordDown(c)...)
			}
			ev = append(ev, macEvent{E: "sleep", Ms: int(a.Duration.Milliseconds())})
			for i := len(chords) - 1; i >= 0; i-- {
				ev = append(ev, chordUp(chords[i])...)
			}
			break
		}
		for i, c := range chords {
			if i > 0 {
				pause(pauseChord)
			}
			ev = append(ev, chordDown(c)...)
			ev = append(ev, chordUp(c)...)
		}
	case KindType:
		ev = typeEvents(a.Text)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, a.Kind)
	}
	return ev, nil
}

// typeEvents types text: short printable ASCII through System Events'
// keystroke, anything else by pasting it a line at a time with Return
// between the lines, the old clipboard text put back at the end.
func typeEvents(text string) []macEvent {
	if len(text) <= keystrokeMax && keystrokable(text) {
		return []macEvent{{E: "keystroke", Text: text}}
	}
	var ev []macEvent
	paste := chord{mods: []int{codeCommand}, flags: flagCommand, code: codeV}
	ret := chord{code: codeReturn}
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			ev = append(ev, chordDown(ret)...)
			ev = append(ev, chordUp(ret)...)
			ev = append(ev, macEvent{E: "sleep", Ms: pauseChord})
		}
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		ev = append(ev, macEvent{E: "paste", Text: line})
		ev = append(ev, chordDown(paste)...)
		ev = append(ev, chordUp(paste)...)
		ev = append(ev, macEvent{E: "sleep", Ms: pausePaste})
	}
	return append(ev, macEvent{E: "restore"})
}

// keystrokable reports whether System Events' keystroke types s as is:
// printable ASCII, tabs and newlines.
func keystrokable(s string) bool {
	for _, r := range s {
		if (r < ' ' || r > '~') && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

// chordDown presses a chord's modifiers, then its key.
func chordDown(c chord) []macEvent {
	ev := modsDown(c)
	if c.code >= 0 {
		ev = append(ev, macEvent{E: "key", Code: c.code, Down: true, Flags: c.flags})
	}
	return ev
}

// chordUp releases a chord's key, then its modifiers.
func chordUp(c chord) []macEvent {
	var ev []macEvent
	if c.code >= 0 {
		ev = append(ev, macEvent{E: "key", Code: c.code, Down: false, Flags: c.flags})
	}
	return append(ev, modsUp(c)...)
}

// modsDown presses modifiers in order, each event carrying the flags held
// so far.
func modsDown(c chord) []macEvent {
	var ev []macEvent
	var flags uint64
	for _, code := range c.mods {
		flags |= modifierFlag(code)
		ev = append(ev, macEvent{E: "key", Code: code, Down: true, Flags: flags})
	}
	return ev
}

// modsUp releases modifiers in reverse order, each event carrying the
// flags still held.
func modsUp(c chord) []macEvent {
	var ev []macEvent
	flags := c.flags
	for i := len(c.mods) - 1; i >= 0; i-- {
		flags &^= modifierFlag(c.mods[i])
		ev = append(ev, macEvent{E: "key", Code: c.mods[i], Down: false, Flags: flags})
	}
	return ev
}

// modifierFlag is the flag of a modifier key's code.
func modifierFlag(code int) uint64 {
	for _, m := range modifiers {
		if m.code == code {
			return m.flag
		}
	}
	return 0
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// inputScript posts the events of one action. It is JavaScript for
// Automation, run as `osascript -l JavaScript -e inputScript EVENTS`, where
// EVENTS is the JSON of a []macEvent: everything the action types arrives
// as data in argv, never as script text.
const inputScript = `ObjC.import('CoreGraphics');
ObjC.import('AppKit');
function post(ev, flags) {
	if (flags) { $.CGEventSetFlags(ev, flags); }
	$.CGEventPost(0, ev); // kCGHIDEventTap
}
function run(argv) {
	var events = JSON.parse(argv[0]);
	var pb = $.NSPasteboard.generalPasteboard;
	var kept = null;
	for (var i = 0; i < events.length; i++) {
		var s = events[i];
		switch (s.e) {
		case 'mouse':
			var m = $.CGEventCreateMouseEvent(null, s.type, {x: s.x, y: s.y}, s.button);
			if (s.clicks > 0) { $.CGEventSetIntegerValueField(m, 1, s.clicks); } // kCGMouseEventClickState
			post(m, s.flags);
			break;
		case 'key':
			post($.CGEventCreateKeyboardEvent(null, s.code, s.down), s.flags);
			break;
		case 'scroll':
			// kCGScrollEventUnitLine; wheel 1 is vertical (positive up), wheel 2 horizontal (positive left).
			post($.CGEventCreateScrollWheelEvent2(null, 1, 2, -s.dy, -s.dx, 0), s.flags);
			break;
		case 'keystroke':
			Application('System Events').keystroke(s.text);
			break;
		case 'paste':
			if (kept === null) {
				var old = pb.stringForType($.NSPasteboardTypeString);
				kept = (old && !old.isNil()) ? ObjC.unwrap(old) : '';
			}
			pb.clearContents;
			pb.setStringForType($(s.text), $.NSPasteboardTypeString);
			break;
		case 'restore':
			if (kept !== null) {
				pb.clearContents;
				if (kept !== '') { pb.setStringForType($(kept), $.NSPasteboardTypeString); }
				kept = null;
			}
			break;
		case 'sleep':
			delay(s.ms / 1000);
			break;
		default:
			throw new Error('unknown event ' + s.e);
		}
	}
	return 'ok';
}`

// measureScript prints the main display's size in points, as JSON
// {"width": W, "height": H}.
const measureScript = `ObjC.import('CoreGraphics');
function run() {
	var b = $.CGDisplayBounds($.CGMainDisplayID());
	return JSON.stringify({width: b.size.width, height: b.size.height});
}`

// osascriptArgs is the argv of osascript that runs script with one
// argument, the JSON of events.
func osascriptArgs(script string, eventsJSON []byte) []string {
	args := []string{"-l", "JavaScript", "-e", script}
	if eventsJSON != nil {
		args = append(args, string(eventsJSON))
	}
	return args
}
