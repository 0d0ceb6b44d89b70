package computeruse

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseAction(t *testing.T) {
	t.Parallel()
	at := cursor{x: 7, y: 8, known: true}
	for _, tc := range []struct {
		in   string
		cur  cursor
		want Action
	}{
		{`{"action":"screenshot"}`, cursor{}, Action{Kind: KindScreenshot}},
		{`{"action":"left_click","coordinate":[0,0]}`, cursor{}, Action{Kind: KindLeftClick}},
		{`{"action":"left_click","coordinate":[99,49]}`, cursor{}, Action{Kind: KindLeftClick, X: 99, Y: 49}},
		{`{"action":"left_click","coordinate":[3.0,4]}`, cursor{}, Action{Kind: KindLeftClick, X: 3, Y: 4}},
		{`{"action":"left_click","coordinate":[3,4],"text":"shift"}`, cursor{}, Action{Kind: KindLeftClick, X: 3, Y: 4, Modifiers: "shift"}},
		{`{"action":"double_click"}`, at, Action{Kind: KindDoubleClick, X: 7, Y: 8}},
		{`{"action":"left_mouse_down"}`, at, Action{Kind: KindLeftMouseDown, X: 7, Y: 8}},
		{`{"action":"mouse_move","coordinate":[1,2]}`, cursor{}, Action{Kind: KindMouseMove, X: 1, Y: 2}},
		{`{"action":"left_click_drag","start_coordinate":[1,2],"coordinate":[30,40]}`, cursor{},
			Action{Kind: KindLeftClickDrag, FromX: 1, FromY: 2, X: 30, Y: 40}},
		{`{"action":"left_click_drag","coordinate":[30,40]}`, at,
			Action{Kind: KindLeftClickDrag, FromX: 7, FromY: 8, X: 30, Y: 40}},
		{`{"action":"scroll","coordinate":[5,5],"scroll_direction":"down","scroll_amount":3}`, cursor{},
			Action{Kind: KindScroll, X: 5, Y: 5, ScrollY: 3}},
		{`{"action":"scroll","scroll_direction":"left","scroll_amount":2}`, cursor{},
			Action{Kind: KindScroll, X: 50, Y: 25, ScrollX: -2}},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":1,"text":"cmd"}`, at,
			Action{Kind: KindScroll, X: 7, Y: 8, ScrollY: -1, Modifiers: "cmd"}},
		{`{"action":"type","text":"héllo\nworld"}`, cursor{}, Action{Kind: KindType, Text: "héllo\nworld"}},
		{`{"action":"key","text":" cmd+a "}`, cursor{}, Action{Kind: KindKey, Key: "cmd+a"}},
		{`{"action":"hold_key","text":"shift","duration":1.5}`, cursor{}, Action{Kind: KindHoldKey, Key: "shift", Duration: 1500 * time.Millisecond}},
		{`{"action":"wait"}`, cursor{}, Action{Kind: KindWait, Duration: time.Second}},
		{`{"action":"wait","duration":0.25}`, cursor{}, Action{Kind: KindWait, Duration: 250 * time.Millisecond}},
		{`{"action":"cursor_position"}`, cursor{}, Action{Kind: KindCursorPosition}},
	} {
		got, err := parseAction([]byte(tc.in), 100, 50, tc.cur)
		if err != nil {
			t.Errorf("parseAction(%s) = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseAction(%s) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseActionErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`[]`:                      "not a computer tool input",
		`{}`:                      "no action given",
		`{"action":"zoom"}`:       `unknown action "zoom"`,
		`{"action":"left_click"}`: "cursor's position is not known",
		`{"action":"mouse_move"}`: `mouse_move needs "coordinate"`,
		`{"action":"left_click","coordinate":[100,0]}`:                                         "off the screen, which is 100x50 pixels",
		`{"action":"left_click","coordinate":[0,50]}`:                                          "off the screen",
		`{"action":"left_click","coordinate":[-1,3]}`:                                          "off the screen",
		`{"action":"left_click","coordinate":[1.5,3]}`:                                         "whole pixels",
		`{"action":"left_click","coordinate":[1]}`:                                             "want [x, y]",
		`{"action":"left_click","coordinate":"1,2"}`:                                           "want [x, y]",
		`{"action":"left_click","coordinate":[1,2],"text":"a"}`:                                "not a modifier key",
		`{"action":"left_click_drag","coordinate":[1,2]}`:                                      `"start_coordinate"`,
		`{"action":"scroll","coordinate":[1,2],"scroll_direction":"down"}`:                     "scroll_amount",
		`{"action":"scroll","coordinate":[1,2],"scroll_direction":"down","scroll_amount":0.5}`: "scroll_amount",
		`{"action":"scroll","coordinate":[1,2],"scroll_direction":"down","scroll_amount":51}`:  "scroll_amount",
		`{"action":"scroll","coordinate":[1,2],"scroll_direction":"in","scroll_amount":1}`:     `scroll_direction "in"`,
		`{"action":"type"}`:                `type needs "text"`,
		`{"action":"type","text":""}`:      `type needs "text"`,
		`{"action":"key"}`:                 "no key given",
		`{"action":"key","text":"Hyper"}`:  `unknown key name "Hyper"`,
		`{"action":"hold_key","text":"a"}`: `hold_key needs "duration"`,
		`{"action":"wait","duration":-1}`:  "duration -1",
		`{"action":"wait","duration":61}`:  "duration 61",
	} {
		if _, err := parseAction([]byte(in), 100, 50, cursor{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseAction(%s) error = %v, want one containing %q", in, err, want)
		}
	}
}
