package computeruse

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Action kinds: the computer tool's action names. The planner answers
// KindScreenshot, KindWait and KindCursorPosition itself; a Screen's Do
// receives every other kind.
const (
	KindScreenshot     = "screenshot"
	KindWait           = "wait"
	KindCursorPosition = "cursor_position"
	KindLeftClick      = "left_click"
	KindRightClick     = "right_click"
	KindMiddleClick    = "middle_click"
	KindDoubleClick    = "double_click"
	KindTripleClick    = "triple_click"
	KindMouseMove      = "mouse_move"
	KindLeftClickDrag  = "left_click_drag"
	KindLeftMouseDown  = "left_mouse_down"
	KindLeftMouseUp    = "left_mouse_up"
	KindScroll         = "scroll"
	KindType           = "type"
	KindKey            = "key"
	KindHoldKey        = "hold_key"
)

// Limits on what one action may ask for.
const (
	maxWait      = 60 * time.Second
	maxScroll    = 50
	maxTypeChars = 100_000
)

// Action is one input action, checked against the Screen's size before a
// Screen sees it.
type Action struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// X and Y are where a mouse action happens, in the Screen's pixels
	// (0 ≤ X < width, 0 ≤ Y < height): the target of a click, a move or a
	// mouse button change, the end of a drag, the point scrolled at. When
	// the planner gives no coordinate, they are the cursor's position as
	// of the last mouse action. Keyboard actions leave them zero.
	X int `json:"x"`
	Y int `json:"y"`
	// FromX and FromY are where a left_click_drag starts.
	FromX int `json:"fromX,omitempty"`
	FromY int `json:"fromY,omitempty"`
	// Text is what a type action types. A newline presses Return.
	Text string `json:"-"`
	// Key is the key combination of a key or hold_key action, in xdotool
	// syntax: names joined by "+", several combinations separated by
	// spaces ("cmd+a BackSpace"). It has been checked to parse.
	Key string `json:"key,omitempty"`
	// Modifiers are the modifier keys held during a click or a scroll
	// ("shift", "cmd+shift"), or "".
	Modifiers string `json:"modifiers,omitempty"`
	// ScrollX and ScrollY are scroll wheel clicks: positive is right and
	// down.
	ScrollX int `json:"scrollX,omitempty"`
	ScrollY int `json:"scrollY,omitempty"`
	// Duration is how long a wait waits or a hold_key holds.
	Duration time.Duration `json:"duration,omitempty"`
}

// toolInput is the input of a computer tool_use block.
type toolInput struct {
	Action          string          `json:"action"`
	Coordinate      json.RawMessage `json:"coordinate"`
	StartCoordinate json.RawMessage `json:"start_coordinate"`
	Text            *string         `json:"text"`
	ScrollDirection string          `json:"scroll_direction"`
	ScrollAmount    *float64        `json:"scroll_amount"`
	Duration        *float64        `json:"duration"`
}

// cursor is the mouse position as the planner last set it.
type cursor struct {
	x, y  int
	known bool
}

// parseAction reads a computer tool_use input and checks it against a
// width×height screen. Its errors are written for the planner, which gets
// them back as an error tool_result.
func parseAction(raw json.RawMessage, width, height int, cur cursor) (Action, error) {
	var in toolInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return Action{}, fmt.Errorf("the input is not a computer tool input: %v", err)
	}
	a := Action{Kind: in.Action}
	text := ""
	if in.Text != nil {
		text = *in.Text
	}
	switch in.Action {
	case "":
		return a, errors.New(`no action given: set "action", e.g. "screenshot"`)

	case KindScreenshot, KindCursorPosition:
		return a, nil

	case KindWait:
		d, err := seconds(in.Duration, time.Second)
		if err != nil {
			return a, err
		}
		a.Duration = d
		return a, nil

	case KindLeftClick, KindRightClick, KindMiddleClick, KindDoubleClick, KindTripleClick,
		KindLeftMouseDown, KindLeftMouseUp, KindMouseMove:
		if err := a.at(in.Coordinate, "coordinate", width, height, cur, in.Action != KindMouseMove); err != nil {
			return a, err
		}
		if in.Action == KindMouseMove {
			return a, nil
		}
		return a, a.holding(text)

	case KindLeftClickDrag:
		if err := a.at(in.Coordinate, "coordinate", width, height, cur, false); err != nil {
			return a, err
		}
		end := a
		if err := a.at(in.StartCoordinate, "start_coordinate", width, height, cur, true); err != nil {
			return a, err
		}
		a.FromX, a.FromY, a.X, a.Y = a.X, a.Y, end.X, end.Y
		return a, a.holding(text)

	case KindScroll:
		center := cursor{x: width / 2, y: height / 2, known: true}
		if cur.known {
			center = cur
		}
		if err := a.at(in.Coordinate, "coordinate", width, height, center, true); err != nil {
			return a, err
		}
		if in.ScrollAmount == nil || *in.ScrollAmount != math.Trunc(*in.ScrollAmount) ||
			*in.ScrollAmount < 1 || *in.ScrollAmount > maxScroll {
			return a, fmt.Errorf("scroll needs scroll_amount, a whole number of wheel clicks from 1 to %d", maxScroll)
		}
		n := int(*in.ScrollAmount)
		switch in.ScrollDirection {
		case "up":
			a.ScrollY = -n
		case "down":
			a.ScrollY = n
		case "left":
			a.ScrollX = -n
		case "right":
			a.ScrollX = n
		default:
			return a, fmt.Errorf("scroll_direction %q: use up, down, left or right", in.ScrollDirection)
		}
		return a, a.holding(text)

	case KindType:
		switch {
		case text == "":
			return a, errors.New(`type needs "text", the text to type`)
		case !utf8.ValidString(text):
			return a, errors.New("the text to type is not valid UTF-8")
		case utf8.RuneCountInString(text) > maxTypeChars:
			return a, fmt.Errorf("the text to type has more than %d characters: type it in parts", maxTypeChars)
		}
		a.Text = text
		return a, nil

	case KindKey, KindHoldKey:
		if _, err := parseKeys(text); err != nil {
			return a, fmt.Errorf("%s: %v", in.Action, err)
		}
		a.Key = strings.TrimSpace(text)
		if in.Action == KindHoldKey {
			if in.Duration == nil {
				return a, errors.New(`hold_key needs "duration", in seconds`)
			}
			d, err := seconds(in.Duration, 0)
			if err != nil {
				return a, err
			}
			a.Duration = d
		}
		return a, nil
	}
	return a, fmt.Errorf("unknown action %q: this computer supports %s", in.Action, strings.Join(supported, ", "))
}

// supported lists the actions parseAction accepts, for its error.
var supported = []string{
	KindScreenshot, KindLeftClick, KindRightClick, KindMiddleClick, KindDoubleClick,
	KindTripleClick, KindMouseMove, KindLeftClickDrag, KindLeftMouseDown, KindLeftMouseUp,
	KindScroll, KindType, KindKey, KindHoldKey, KindWait, KindCursorPosition,
}

// at sets X and Y from a coordinate field. Without the field, it takes the
// cursor's position if optional allows it and the position is known.
func (a *Action) at(raw json.RawMessage, field string, width, height int, cur cursor, optional bool) error {
	if len(raw) == 0 || string(raw) == "null" {
		switch {
		case !optional:
			return fmt.Errorf("%s needs %q, [x, y] in pixels", a.Kind, field)
		case !cur.known:
			return fmt.Errorf("%s has no %q and the cursor's position is not known yet: give [x, y]", a.Kind, field)
		}
		a.X, a.Y = cur.x, cur.y
		return nil
	}
	var xy []float64
	if err := json.Unmarshal(raw, &xy); err != nil || len(xy) != 2 {
		return fmt.Errorf("%s %s %s: want [x, y], two whole numbers", a.Kind, field, raw)
	}
	for _, v := range xy {
		if v != math.Trunc(v) {
			return fmt.Errorf("%s %s %s: want whole pixels", a.Kind, field, raw)
		}
	}
	x, y := xy[0], xy[1]
	if x < 0 || y < 0 || x >= float64(width) || y >= float64(height) {
		return fmt.Errorf("%s %s %s is off the screen, which is %dx%d pixels (x from 0 to %d, y from 0 to %d)",
			a.Kind, field, raw, width, height, width-1, height-1)
	}
	a.X, a.Y = int(x), int(y)
	return nil
}

// holding sets the modifiers held during a click or a scroll, from the
// tool's text field.
func (a *Action) holding(text string) error {
	if _, err := parseModifiers(text); err != nil {
		return fmt.Errorf("%s text: %v", a.Kind, err)
	}
	a.Modifiers = strings.TrimSpace(text)
	return nil
}

// seconds reads a duration in seconds, between 0 and maxWait; nil gives
// def.
func seconds(v *float64, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	if *v < 0 || *v > maxWait.Seconds() || math.IsNaN(*v) {
		return 0, fmt.Errorf("duration %v: want seconds from 0 to %v", *v, maxWait.Seconds())
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// pointer reports whether an action moves the mouse, so the cursor is at
// X, Y after it.
func (a Action) pointer() bool {
	switch a.Kind {
	case KindLeftClick, KindRightClick, KindMiddleClick, KindDoubleClick, KindTripleClick,
		KindMouseMove, KindLeftClickDrag, KindLeftMouseDown, KindLeftMouseUp, KindScroll:
		return true
	}
	return false
}
