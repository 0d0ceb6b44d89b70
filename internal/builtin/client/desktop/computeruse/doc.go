// Package computeruse drives a desktop app with Anthropic's Computer Use:
// a planner model looks at screenshots and asks for mouse and keyboard
// actions through the computer tool, and this package performs them on a
// Screen until the planner answers in text.
//
// MST's desktop clients use it on macOS, where the client option
// computerUseModel names the planner. The package knows nothing of the
// clients: it takes a task in words (ConverseTask builds the usual one, a
// prompt sent to a chat app) and returns the planner's answer.
//
// # Flow of one Do
//
//	Planner.Do(ctx, task)
//	  request: system prompt, the task, the computer tool sized by Screen.Size
//	  loop:
//	    answer without tool_use  → Result.Answer, done
//	                               (FailedPrefix → ErrGaveUp)
//	    each tool_use:
//	      over MaxActions        → ErrBudget
//	      bad input or action    → error tool_result, the loop goes on
//	      screenshot             → Screen.Capture → image tool_result
//	      wait                   → sleep, then an image tool_result
//	      cursor_position        → the last mouse position, as text
//	      any other              → Screen.Do → "done" (or, with
//	                               ScreenshotAfter, an image tool_result)
//	    only the latest KeepScreenshots images stay in the conversation
//	    request again with the whole conversation
//
// An API failure ends the loop with ErrPlanner, a Screen failure with
// ErrScreen, and an ended ctx with its cause, at once: ctx is passed to the
// API request, the Screen and every wait. The Result holds what was done up
// to then: turns, actions, summed token usage and one Step per action, with
// sizes in place of screenshots and typed text.
//
// # macOS
//
// NewMacScreen (darwin only; elsewhere it fails) captures the main display
// with /usr/sbin/screencapture and scales it down to at most 1280×800 by
// default, and performs actions by running osascript with a fixed
// JavaScript for Automation script that posts CoreGraphics events. The
// events are built in Go (macinput.go, which builds and is tested on every
// OS) and passed to the script as JSON in argv, so no text the planner
// types is ever part of a script. Short printable ASCII is typed with
// System Events' keystroke; other text is pasted through the clipboard a
// line at a time, and the clipboard's previous text is put back.
package computeruse
