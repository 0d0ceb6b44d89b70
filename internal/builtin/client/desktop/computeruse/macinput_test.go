package computeruse

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNewGeometry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		w, h, maxW, maxH float64
		wantW, wantH     int
	}{
		{1440, 900, 0, 0, 1280, 800},  // 16:10 MacBook, default bounds
		{1920, 1080, 0, 0, 1280, 720}, // 16:9
		{1024, 640, 0, 0, 1024, 640},  // small already: never scaled up
		{1512, 982, 0, 0, 1232, 800},  // MacBook Pro 14"
		{2560, 1440, 1024, 768, 1024, 576},
	} {
		g, err := newGeometry(tc.w, tc.h, int(tc.maxW), int(tc.maxH))
		if err != nil || g.width != tc.wantW || g.height != tc.wantH {
			t.Errorf("newGeometry(%vx%v, max %vx%v) = %dx%d, %v; want %dx%d",
				tc.w, tc.h, tc.maxW, tc.maxH, g.width, g.height, err, tc.wantW, tc.wantH)
		}
	}
	if _, err := newGeometry(0, 900, 0, 0); err == nil {
		t.Error("newGeometry(0x900) succeeded, want an error")
	}
}

func TestGeometryPoint(t *testing.T) {
	t.Parallel()
	g, _ := newGeometry(1440, 900, 0, 0) // 1280x800: 1.125 points per pixel
	for _, tc := range []struct {
		x, y   int
		px, py float64
	}{
		{0, 0, 0.56, 0.56},
		{640, 400, 720.56, 450.56},
		{1279, 799, 1439.44, 899.44},
	} {
		px, py := g.point(tc.x, tc.y)
		if px != tc.px || py != tc.py {
			t.Errorf("point(%d, %d) = %v, %v; want %v, %v", tc.x, tc.y, px, py, tc.px, tc.py)
		}
	}
}

// unitGeometry maps pixels to points one to one, plus half a point to the
// pixel's center.
var unitGeometry = macGeometry{width: 100, height: 100, pointsW: 100, pointsH: 100}

func TestMacEvents(t *testing.T) {
	t.Parallel()
	mouse := func(typ int, x, y float64, button, clicks int, flags uint64) macEvent {
		return macEvent{E: "mouse", Type: typ, X: x, Y: y, Button: button, Clicks: clicks, Flags: flags}
	}
	key := func(code int, down bool, flags uint64) macEvent {
		return macEvent{E: "key", Code: code, Down: down, Flags: flags}
	}
	sleep := func(ms int) macEvent { return macEvent{E: "sleep", Ms: ms} }
	for _, tc := range []struct {
		name     string
		a        Action
		leftHeld bool
		want     []macEvent
	}{
		{"move", Action{Kind: KindMouseMove, X: 10, Y: 20}, false,
			[]macEvent{mouse(evMouseMoved, 10.5, 20.5, 0, 0, 0)}},
		{"move while held drags", Action{Kind: KindMouseMove, X: 10, Y: 20}, true,
			[]macEvent{mouse(evLeftDragged, 10.5, 20.5, 0, 0, 0)}},
		{"left click", Action{Kind: KindLeftClick, X: 1, Y: 2}, false, []macEvent{
			mouse(evMouseMoved, 1.5, 2.5, 0, 0, 0),
			mouse(evLeftDown, 1.5, 2.5, 0, 1, 0),
			mouse(evLeftUp, 1.5, 2.5, 0, 1, 0),
		}},
		{"shift right click", Action{Kind: KindRightClick, X: 1, Y: 2, Modifiers: "shift"}, false, []macEvent{
			mouse(evMouseMoved, 1.5, 2.5, 0, 0, flagShift),
			key(0x38, true, flagShift),
			mouse(evRightDown, 1.5, 2.5, 1, 1, flagShift),
			mouse(evRightUp, 1.5, 2.5, 1, 1, flagShift),
			key(0x38, false, 0),
		}},
		{"middle click", Action{Kind: KindMiddleClick, X: 1, Y: 2}, false, []macEvent{
			mouse(evMouseMoved, 1.5, 2.5, 0, 0, 0),
			mouse(evOtherDown, 1.5, 2.5, 2, 1, 0),
			mouse(evOtherUp, 1.5, 2.5, 2, 1, 0),
		}},
		{"double click counts its clicks", Action{Kind: KindDoubleClick, X: 1, Y: 2}, false, []macEvent{
			mouse(evMouseMoved, 1.5, 2.5, 0, 0, 0),
			mouse(evLeftDown, 1.5, 2.5, 0, 1, 0),
			mouse(evLeftUp, 1.5, 2.5, 0, 1, 0),
			sleep(pauseEvent),
			mouse(evLeftDown, 1.5, 2.5, 0, 2, 0),
			mouse(evLeftUp, 1.5, 2.5, 0, 2, 0),
		}},
		{"scroll down", Action{Kind: KindScroll, X: 3, Y: 4, ScrollY: 5}, false, []macEvent{
			mouse(evMouseMoved, 3.5, 4.5, 0, 0, 0),
			{E: "scroll", DY: 5},
		}},
		{"cmd+a", Action{Kind: KindKey, Key: "cmd+a"}, false, []macEvent{
			key(0x37, true, flagCommand),
			key(0x00, true, flagCommand),
			key(0x00, false, flagCommand),
			key(0x37, false, 0),
		}},
		{"two chords", Action{Kind: KindKey, Key: "ctrl+shift+t Return"}, false, []macEvent{
			key(0x3B, true, flagControl),
			key(0x38, true, flagControl|flagShift),
			key(0x11, true, flagControl|flagShift),
			key(0x11, false, flagControl|flagShift),
			key(0x38, false, flagControl),
			key(0x3B, false, 0),
			sleep(pauseChord),
			key(0x24, true, 0),
			key(0x24, false, 0),
		}},
		{"hold key", Action{Kind: KindHoldKey, Key: "shift", Duration: 1500 * time.Millisecond}, false, []macEvent{
			key(0x38, true, flagShift),
			sleep(1500),
			key(0x38, false, 0),
		}},
		{"mouse down then up", Action{Kind: KindLeftMouseDown, X: 9, Y: 9}, false, []macEvent{
			mouse(evLeftDown, 9.5, 9.5, 0, 1, 0),
		}},
		{"type ascii", Action{Kind: KindType, Text: "Hi \"you\"\tthere\n"}, false, []macEvent{
			{E: "keystroke", Text: "Hi \"you\"\tthere\n"},
		}},
	} {
		got, err := macEvents(tc.a, unitGeometry, tc.leftHeld)
		if err != nil {
			t.Errorf("%s: macEvents = %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: macEvents (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestMacEventsDrag(t *testing.T) {
	t.Parallel()
	got, err := macEvents(Action{Kind: KindLeftClickDrag, FromX: 0, FromY: 0, X: 12, Y: 24}, unitGeometry, false)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []int
	for _, e := range got {
		if e.E == "mouse" {
			kinds = append(kinds, e.Type)
		}
	}
	want := []int{evMouseMoved, evLeftDown}
	for range dragSteps {
		want = append(want, evLeftDragged)
	}
	want = append(want, evLeftUp)
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("drag mouse events (-want +got):\n%s", diff)
	}
	first, last := got[1], got[len(got)-1]
	if first.X != 0.5 || first.Y != 0.5 || last.X != 12.5 || last.Y != 24.5 {
		t.Errorf("drag from %v,%v to %v,%v; want 0.5,0.5 to 12.5,24.5", first.X, first.Y, last.X, last.Y)
	}
}

func TestTypeEventsPaste(t *testing.T) {
	t.Parallel()
	got := typeEvents("héllo\n\nwörld")
	var steps []string
	for _, e := range got {
		switch e.E {
		case "key":
			steps = append(steps, map[bool]string{true: "down ", false: "up "}[e.Down]+map[int]string{codeCommand: "cmd", codeV: "v", codeReturn: "Return"}[e.Code])
		case "paste":
			steps = append(steps, "paste "+e.Text)
		default:
			steps = append(steps, e.E)
		}
	}
	want := []string{
		"paste héllo", "down cmd", "down v", "up v", "up cmd", "sleep",
		"down Return", "up Return", "sleep",
		"down Return", "up Return", "sleep",
		"paste wörld", "down cmd", "down v", "up v", "up cmd", "sleep",
		"restore",
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("typeEvents (-want +got):\n%s", diff)
	}
	if got := typeEvents(strings.Repeat("a", keystrokeMax+1)); got[0].E != "paste" {
		t.Errorf("typeEvents of %d characters starts with %q, want paste", keystrokeMax+1, got[0].E)
	}
}

func TestMacEventsErrors(t *testing.T) {
	t.Parallel()
	for _, a := range []Action{
		{Kind: KindKey, Key: "Hyper"},
		{Kind: KindLeftClick, Modifiers: "a"},
		{Kind: KindScreenshot},
		{Kind: "fly"},
	} {
		if _, err := macEvents(a, unitGeometry, false); !errors.Is(err, ErrUnsupported) {
			t.Errorf("macEvents(%+v) error = %v, want ErrUnsupported", a, err)
		}
	}
}

// TestOsascriptArgs checks that what is typed reaches the script as data:
// the script is the fixed text, and the text arrives in one argument that
// decodes to the events.
func TestOsascriptArgs(t *testing.T) {
	t.Parallel()
	text := "'); Application('Finder').delete(); ('\n$(rm -rf ~) \"quoted\" ` -e x"
	events, err := macEvents(Action{Kind: KindType, Text: text}, unitGeometry, false)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	args := osascriptArgs(inputScript, payload)
	if diff := cmp.Diff([]string{"-l", "JavaScript", "-e", inputScript, string(payload)}, args); diff != "" {
		t.Errorf("osascriptArgs (-want +got):\n%s", diff)
	}
	if strings.HasPrefix(args[4], "-") {
		t.Errorf("the events argument %q could be read as an option", args[4])
	}
	var back []macEvent
	if err := json.Unmarshal([]byte(args[4]), &back); err != nil {
		t.Fatal(err)
	}
	var typed strings.Builder
	for _, e := range back {
		typed.WriteString(e.Text)
	}
	if typed.String() != text {
		t.Errorf("the events carry %q, want the text %q", typed.String(), text)
	}
	if strings.Contains(inputScript, "Finder") {
		t.Error("the script holds typed text")
	}
	if got := osascriptArgs(measureScript, nil); len(got) != 4 {
		t.Errorf("osascriptArgs without events = %q, want no argument after the script", got)
	}
	// Every step the events use is one the script handles.
	for _, e := range []string{"mouse", "key", "scroll", "keystroke", "paste", "restore", "sleep"} {
		if !strings.Contains(inputScript, "case '"+e+"':") {
			t.Errorf("inputScript has no case for %q events", e)
		}
	}
}
