package computeruse

import (
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// toolName is the computer tool's name in tool_use blocks.
const toolName = "computer"

// Computer tool types the Planner can offer.
const (
	// ToolComputer20250124 is the tool of the Claude 4 models up to
	// Sonnet 4.5, Haiku 4.5 and Opus 4.1, and of Sonnet 3.7, sent with the
	// computer-use-2025-01-24 beta.
	ToolComputer20250124 = "computer_20250124"
	// ToolComputer20251124 is the tool of Opus 4.5 and the models after
	// it, sent with the computer-use-2025-11-24 beta. Its zoom action is
	// not enabled.
	ToolComputer20251124 = "computer_20251124"
)

// olderToolModels are the model id prefixes trained with
// ToolComputer20250124; every other model gets ToolComputer20251124.
var olderToolModels = []string{
	"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "claude-opus-4-0",
	"claude-opus-4-2025", "claude-sonnet-4-0", "claude-sonnet-4-2025", "claude-3-7-sonnet",
}

// ToolVersionFor is the computer tool type a model was trained with:
// ToolComputer20250124 for the models up to Sonnet 4.5, Haiku 4.5 and
// Opus 4.1, ToolComputer20251124 for any other.
func ToolVersionFor(model string) string {
	model = strings.TrimPrefix(model, "anthropic/")
	for _, p := range olderToolModels {
		if strings.HasPrefix(model, p) {
			return ToolComputer20250124
		}
	}
	return ToolComputer20251124
}

// computerTool is the tool definition of a version for a width×height
// screen, and the beta it needs.
func computerTool(version string, width, height int) (anthropic.BetaToolUnionParam, anthropic.AnthropicBeta, error) {
	w, h := int64(width), int64(height)
	switch version {
	case ToolComputer20250124:
		return anthropic.BetaToolUnionParam{OfComputerUseTool20250124: &anthropic.BetaToolComputerUse20250124Param{
			DisplayWidthPx: w, DisplayHeightPx: h,
		}}, anthropic.AnthropicBetaComputerUse2025_01_24, nil
	case ToolComputer20251124:
		return anthropic.BetaToolUnionParam{OfComputerUseTool20251124: &anthropic.BetaToolComputerUse20251124Param{
			DisplayWidthPx: w, DisplayHeightPx: h,
		}}, anthropic.AnthropicBetaComputerUse2025_11_24, nil
	}
	return anthropic.BetaToolUnionParam{}, "", fmt.Errorf("computer use: unknown tool version %q (known: %s, %s)",
		version, ToolComputer20250124, ToolComputer20251124)
}

// systemPrompt tells the planner where it is and how to finish.
func systemPrompt(width, height int, screenshotAfter bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You operate a Mac through the computer tool. The screen is %dx%d pixels, and every coordinate is in those pixels.\n", width, height)
	b.WriteString("Use macOS conventions: the Command key is cmd (cmd+a selects all, cmd+v pastes, cmd+n opens a new window or chat). ")
	b.WriteString("Apps may be slow: after an action that starts something, wait and check before acting again.\n")
	if screenshotAfter {
		b.WriteString("Each action's result is a screenshot of the screen after it.\n")
	} else {
		b.WriteString("Actions answer with a short text, not a screenshot: take a screenshot whenever you need to see the effect of what you did. Start with a screenshot.\n")
	}
	b.WriteString("Do only what the task asks; do not change settings or open other apps unless the task requires it.\n")
	b.WriteString("When the task is done, stop using the tool and reply with exactly what the task asks for, and nothing else. ")
	fmt.Fprintf(&b, "If you cannot do the task, reply with a line that starts with %q followed by the reason.", FailedPrefix)
	return b.String()
}

// Markers around the prompt in ConverseTask's text.
const (
	promptStart = "<<<PROMPT"
	promptEnd   = "PROMPT>>>"
)

// ConverseTask is the task of one conversation turn in a chat app: open
// app, send prompt in a new conversation, wait for the whole answer and
// reply with its text. The prompt goes between markers, so that the
// planner types it exactly, line breaks included.
func ConverseTask(app, prompt string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "In the macOS app %q, do the following.\n", app)
	fmt.Fprintf(&b, "1. Bring the app to the front (click its window, or its icon in the Dock). If a conversation is already open and not empty, start a new one.\n")
	fmt.Fprintf(&b, "2. Click the message box and type the prompt below exactly as written: every character between the line %q and the line %q, without those two lines. ", promptStart, promptEnd)
	b.WriteString("Where the prompt has a line break, press shift+Return rather than Return, so the message is not sent early.\n")
	b.WriteString("3. Send the message (Return, or the send button).\n")
	b.WriteString("4. Wait until the app has finished answering. It may use tools first and take minutes; if it asks whether it may use a tool or connector, allow it. Answers stream in: it is finished when no stop button or progress indicator remains.\n")
	b.WriteString("5. Reply with the full text of the app's final answer to this prompt, as it appears, and nothing else: no comment or summary of yours. Scroll if the answer is longer than the window.\n\n")
	b.WriteString(promptStart + "\n")
	b.WriteString(prompt)
	b.WriteString("\n" + promptEnd)
	return b.String()
}
