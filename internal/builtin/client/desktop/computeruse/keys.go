package computeruse

import (
	"fmt"
	"strings"
)

// chord is one key press with the modifier keys held during it, as parsed
// from the computer tool's xdotool-style key syntax ("cmd+a", "Return",
// "ctrl+shift+t"). The codes are macOS virtual key codes (the kVK_ values
// of Carbon's Events.h for an ANSI keyboard); the names are the same on
// every OS, so the planner checks them wherever it runs.
type chord struct {
	// mods are the modifier keys, in the order they are pressed.
	mods []int
	// flags are the CGEventFlags of mods together.
	flags uint64
	// code is the key pressed while mods are held, or -1 when the chord is
	// modifiers alone ("shift").
	code int
}

// CGEventFlags of the modifier keys.
const (
	flagShift   uint64 = 1 << 17 // kCGEventFlagMaskShift
	flagControl uint64 = 1 << 18 // kCGEventFlagMaskControl
	flagOption  uint64 = 1 << 19 // kCGEventFlagMaskAlternate
	flagCommand uint64 = 1 << 20 // kCGEventFlagMaskCommand
	flagFn      uint64 = 1 << 23 // kCGEventFlagMaskSecondaryFn
)

// Virtual key codes the input code presses itself.
const (
	codeReturn  = 0x24
	codeV       = 0x09
	codeCommand = 0x37
)

// modifier is a modifier key: its code and its flag.
type modifier struct {
	code int
	flag uint64
}

// modifiers maps the lowercased names a planner uses for modifier keys,
// xdotool's and macOS's, to the keys.
var modifiers = map[string]modifier{
	"cmd": {0x37, flagCommand}, "command": {0x37, flagCommand}, "super": {0x37, flagCommand},
	"super_l": {0x37, flagCommand}, "super_r": {0x36, flagCommand}, "meta": {0x37, flagCommand},
	"meta_l": {0x37, flagCommand}, "meta_r": {0x36, flagCommand}, "win": {0x37, flagCommand},
	"shift": {0x38, flagShift}, "shift_l": {0x38, flagShift}, "shift_r": {0x3C, flagShift},
	"ctrl": {0x3B, flagControl}, "control": {0x3B, flagControl}, "control_l": {0x3B, flagControl},
	"ctrl_l": {0x3B, flagControl}, "control_r": {0x3E, flagControl}, "ctrl_r": {0x3E, flagControl},
	"alt": {0x3A, flagOption}, "option": {0x3A, flagOption}, "opt": {0x3A, flagOption},
	"alt_l": {0x3A, flagOption}, "alt_r": {0x3D, flagOption},
	"fn": {0x3F, flagFn},
}

// namedKeys maps the lowercased xdotool keysym names (and a few common
// spellings) of keys that are not modifiers to their codes. Delete is the
// forward delete key, as in xdotool; BackSpace is the key macOS labels
// delete.
var namedKeys = map[string]int{
	"return": 0x24, "enter": 0x24, "kp_enter": 0x4C, "tab": 0x30, "space": 0x31,
	"backspace": 0x33, "delete": 0x75, "escape": 0x35, "esc": 0x35,
	"up": 0x7E, "down": 0x7D, "left": 0x7B, "right": 0x7C,
	"home": 0x73, "end": 0x77, "page_up": 0x74, "pageup": 0x74, "prior": 0x74,
	"page_down": 0x79, "pagedown": 0x79, "next": 0x79, "insert": 0x72, "help": 0x72,
	"caps_lock": 0x39, "capslock": 0x39,
	"f1": 0x7A, "f2": 0x78, "f3": 0x63, "f4": 0x76, "f5": 0x60, "f6": 0x61,
	"f7": 0x62, "f8": 0x64, "f9": 0x65, "f10": 0x6D, "f11": 0x67, "f12": 0x6F,
	"f13": 0x69, "f14": 0x6B, "f15": 0x71, "f16": 0x6A, "f17": 0x40, "f18": 0x4F,
	"f19": 0x50, "f20": 0x5A,
	"minus": 0x1B, "equal": 0x18, "bracketleft": 0x21, "bracketright": 0x1E,
	"backslash": 0x2A, "semicolon": 0x29, "apostrophe": 0x27, "quoteright": 0x27,
	"grave": 0x32, "quoteleft": 0x32, "comma": 0x2B, "period": 0x2F, "slash": 0x2C,
	"kp_0": 0x52, "kp_1": 0x53, "kp_2": 0x54, "kp_3": 0x55, "kp_4": 0x56,
	"kp_5": 0x57, "kp_6": 0x58, "kp_7": 0x59, "kp_8": 0x5B, "kp_9": 0x5C,
	"kp_add": 0x45, "kp_subtract": 0x4E, "kp_multiply": 0x43, "kp_divide": 0x4B,
	"kp_decimal": 0x41, "kp_equal": 0x51,
	"volumeup": 0x48, "volumedown": 0x49, "mute": 0x4A,
}

// shiftedNames are xdotool names of characters typed with shift.
var shiftedNames = map[string]string{
	"plus": "=", "underscore": "-", "exclam": "1", "at": "2", "numbersign": "3",
	"dollar": "4", "percent": "5", "asciicircum": "6", "ampersand": "7",
	"asterisk": "8", "parenleft": "9", "parenright": "0", "braceleft": "[",
	"braceright": "]", "bar": "\\", "colon": ";", "quotedbl": "'", "less": ",",
	"greater": ".", "question": "/", "asciitilde": "`",
}

// charKeys maps the characters of the US ANSI layout to their codes.
var charKeys = map[rune]int{
	'a': 0x00, 's': 0x01, 'd': 0x02, 'f': 0x03, 'h': 0x04, 'g': 0x05, 'z': 0x06,
	'x': 0x07, 'c': 0x08, 'v': 0x09, 'b': 0x0B, 'q': 0x0C, 'w': 0x0D, 'e': 0x0E,
	'r': 0x0F, 'y': 0x10, 't': 0x11, '1': 0x12, '2': 0x13, '3': 0x14, '4': 0x15,
	'6': 0x16, '5': 0x17, '=': 0x18, '9': 0x19, '7': 0x1A, '-': 0x1B, '8': 0x1C,
	'0': 0x1D, ']': 0x1E, 'o': 0x1F, 'u': 0x20, '[': 0x21, 'i': 0x22, 'p': 0x23,
	'l': 0x25, 'j': 0x26, '\'': 0x27, 'k': 0x28, ';': 0x29, '\\': 0x2A, ',': 0x2B,
	'/': 0x2C, 'n': 0x2D, 'm': 0x2E, '.': 0x2F, '`': 0x32, ' ': 0x31,
}

// shiftedChars maps characters typed with shift to the unshifted character
// of the same key, on the US layout.
var shiftedChars = map[rune]rune{
	'!': '1', '@': '2', '#': '3', '$': '4', '%': '5', '^': '6', '&': '7', '*': '8',
	'(': '9', ')': '0', '_': '-', '+': '=', '{': '[', '}': ']', '|': '\\', ':': ';',
	'"': '\'', '<': ',', '>': '.', '?': '/', '~': '`',
}

// parseKeys reads one or more chords separated by white space, e.g.
// "cmd+a BackSpace". Names are case-insensitive, so "cmd+A" is cmd+a, not
// cmd+shift+a; a character typed with shift on the US layout ("!", "?",
// "plus") adds shift.
func parseKeys(s string) ([]chord, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("no key given: name one, such as Return or cmd+a")
	}
	out := make([]chord, 0, len(fields))
	for _, f := range fields {
		c, err := parseChord(f)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// parseChord reads one chord: names joined by "+". A lone "+" or a
// trailing "++" names the plus key.
func parseChord(s string) (chord, error) {
	var names []string
	switch {
	case s == "+":
		names = []string{"+"}
	case strings.HasSuffix(s, "++"):
		names = append(strings.Split(strings.TrimSuffix(s, "++"), "+"), "+")
	default:
		names = strings.Split(s, "+")
	}
	c := chord{code: -1}
	for i, name := range names {
		if name == "" {
			return chord{}, fmt.Errorf("key %q has an empty name between its + signs", s)
		}
		last := i == len(names)-1
		if m, ok := modifiers[strings.ToLower(name)]; ok {
			c.addMod(m)
			continue
		}
		if !last {
			return chord{}, fmt.Errorf("key %q: %q is not a modifier (cmd, ctrl, alt, shift or fn); only the last name may be another key", s, name)
		}
		code, shifted, err := keyCode(name)
		if err != nil {
			return chord{}, fmt.Errorf("key %q: %w", s, err)
		}
		if shifted {
			c.addMod(modifiers["shift"])
		}
		c.code = code
	}
	return c, nil
}

// addMod adds a modifier unless its flag is already held.
func (c *chord) addMod(m modifier) {
	if c.flags&m.flag != 0 {
		return
	}
	c.mods = append(c.mods, m.code)
	c.flags |= m.flag
}

// keyCode finds the key of a name that is not a modifier, and whether it is
// typed with shift.
func keyCode(name string) (code int, shifted bool, err error) {
	lower := strings.ToLower(name)
	if code, ok := namedKeys[lower]; ok {
		return code, false, nil
	}
	if base, ok := shiftedNames[lower]; ok {
		return charKeys[rune(base[0])], true, nil
	}
	if r := []rune(lower); len(r) == 1 {
		if code, ok := charKeys[r[0]]; ok {
			return code, false, nil
		}
		if base, ok := shiftedChars[r[0]]; ok {
			return charKeys[base], true, nil
		}
	}
	return 0, false, fmt.Errorf("unknown key name %q: use xdotool names such as Return, Tab, Escape, BackSpace, Delete, Up, Page_Down, F5, a letter or a digit", name)
}

// parseModifiers reads the modifier keys held during a click or a scroll,
// e.g. "shift" or "cmd+shift". Every name must be a modifier.
func parseModifiers(s string) (chord, error) {
	c := chord{code: -1}
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	for name := range strings.SplitSeq(strings.TrimSpace(s), "+") {
		m, ok := modifiers[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return chord{}, fmt.Errorf("%q is not a modifier key to hold (cmd, ctrl, alt, shift or fn)", name)
		}
		c.addMod(m)
	}
	return c, nil
}
