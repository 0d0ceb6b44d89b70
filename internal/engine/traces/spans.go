package traces

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mst-eval/mst/client"
	"github.com/mst-eval/mst/transcript"
)

// maxContent caps the arguments and result of a tool call in a span, in
// bytes; longer ones are cut and end in "…".
const maxContent = 4096

// Trial exports the spans of one trial's transcript. t may hold secret
// values: every string is redacted before it is put in a span.
func (e *Exporter) Trial(t *transcript.Transcript) {
	if e == nil || t == nil {
		return
	}
	start, end := t.Timing.Started, t.Timing.Ended
	if end.IsZero() || end.Before(start) {
		end = start.Add(ms(t.Timing.DurationMs))
	}
	provider, model := providerModel(t.Client.Name, t.Model)
	genai := func(op string) []attribute.KeyValue {
		kv := []attribute.KeyValue{attribute.String("gen_ai.operation.name", op)}
		if provider != "" {
			// gen_ai.system is the older name of gen_ai.provider.name;
			// both are set so backends of either age group the spans.
			kv = append(kv, e.str("gen_ai.provider.name", provider), e.str("gen_ai.system", provider))
		}
		if model != "" {
			kv = append(kv, e.str("gen_ai.request.model", model))
		}
		return kv
	}

	attrs := append(genai("invoke_agent"),
		e.str("gen_ai.agent.name", t.Client.Name),
		attribute.Int64("gen_ai.usage.input_tokens", t.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", t.Usage.OutputTokens),
		e.str("mst.run.id", t.Run),
		e.str("mst.case", t.Case),
		e.str("mst.variant", t.Variant),
		attribute.Int("mst.trial", t.Trial),
		attribute.Int("mst.shard", t.Shard),
		e.str("mst.client", t.Client.Name),
		e.str("mst.model", t.Model),
		e.str("mst.outcome", t.Outcome.Status),
		attribute.Float64("mst.duration_ms", t.Timing.DurationMs),
		attribute.Int("mst.model_calls", t.Usage.ModelCalls),
		attribute.Int("mst.tool_calls", len(t.ToolCalls)),
		e.str("mst.runner", t.Environment.Runner),
	)
	if t.Client.Version != "" {
		attrs = append(attrs, e.str("mst.client.version", t.Client.Version))
	}
	if t.Outcome.Cause != "" {
		attrs = append(attrs, e.str("mst.outcome.cause", t.Outcome.Cause))
	}
	if t.Outcome.Detail != "" {
		attrs = append(attrs, e.text("mst.outcome.detail", t.Outcome.Detail))
	}
	if t.Usage.CachedTokens != 0 {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", t.Usage.CachedTokens))
	}
	if t.Usage.CostUSD != 0 {
		attrs = append(attrs, attribute.Float64("mst.cost_usd", t.Usage.CostUSD))
	}
	if t.Timing.SetupMs != 0 {
		attrs = append(attrs, attribute.Float64("mst.setup_ms", t.Timing.SetupMs))
	}
	ctx, root := e.tracer.Start(context.Background(), e.clean("invoke_agent "+t.Client.Name),
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	switch t.Outcome.Status {
	case transcript.Errored:
		root.SetAttributes(e.str("error.type", t.Outcome.Cause))
		root.SetStatus(codes.Error, e.cut(t.Outcome.Cause+": "+t.Outcome.Detail))
	case transcript.TimedOut:
		root.SetAttributes(attribute.String("error.type", "timeout"))
		root.SetStatus(codes.Error, e.cut("timed out: "+t.Outcome.Detail))
	}

	for _, c := range e.chats(t, start, end) {
		kv := genai("chat")
		if t.Usage.ModelCalls == 1 && c.known {
			// Usage is counted per trial; only a trial of one model call
			// has it per call.
			kv = append(kv,
				attribute.Int64("gen_ai.usage.input_tokens", t.Usage.InputTokens),
				attribute.Int64("gen_ai.usage.output_tokens", t.Usage.OutputTokens))
		}
		kv = append(kv, attribute.Bool("mst.timing_inferred", true))
		_, sp := e.tracer.Start(ctx, e.clean(strings.TrimSpace("chat "+model)),
			trace.WithTimestamp(c.start), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...))
		if c.failed {
			sp.SetAttributes(e.str("error.type", t.Outcome.Cause))
			sp.SetStatus(codes.Error, e.cut(t.Outcome.Detail))
		}
		sp.End(trace.WithTimestamp(c.end))
	}

	servers := map[string]transcript.ServerInfo{}
	for _, s := range t.Servers {
		servers[s.Name] = s
	}
	for _, tc := range t.ToolCalls {
		e.tool(ctx, tc, servers, start)
	}
	root.End(trace.WithTimestamp(end))
}

// tool exports one tool call as a child of the trial's span.
func (e *Exporter) tool(ctx context.Context, tc transcript.ToolCall, servers map[string]transcript.ServerInfo, trialStart time.Time) {
	name := tc.Tool
	if tc.OfferedAs != "" {
		name = tc.OfferedAs // the name the model called it by
	}
	kv := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		e.str("gen_ai.tool.name", name),
		e.str("gen_ai.tool.call.id", tc.ID),
		e.text("gen_ai.tool.call.arguments", string(tc.Arguments)),
		e.text("gen_ai.tool.call.result", tc.Result),
		e.str("mst.tool.server_name", tc.Tool),
	}
	if tc.Server == client.BuiltinServer {
		kv = append(kv, attribute.String("gen_ai.tool.type", "function"), attribute.Bool("mst.tool.builtin", true))
	} else {
		kv = append(kv,
			attribute.String("gen_ai.tool.type", "extension"),
			attribute.String("mcp.method.name", "tools/call"),
			e.str("mcp.server.name", tc.Server))
		if s, ok := servers[tc.Server]; ok {
			if s.ProtocolVersion != "" {
				kv = append(kv, e.str("mcp.protocol.version", s.ProtocolVersion))
			}
			switch s.Transport {
			case "stdio":
				kv = append(kv, attribute.String("network.transport", "pipe"))
			case "http":
				kv = append(kv, attribute.String("network.transport", "tcp"))
			}
		}
	}
	if tc.Evidence != "" {
		kv = append(kv, e.str("mst.tool.evidence", tc.Evidence))
	}
	if tc.Simulated {
		kv = append(kv, attribute.Bool("mst.tool.simulated", true))
	}
	if tc.Injected != "" {
		kv = append(kv, e.str("mst.tool.injected", tc.Injected))
	}
	start := tc.Started
	if start.IsZero() {
		start = trialStart
	}
	_, sp := e.tracer.Start(ctx, e.clean("execute_tool "+name),
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...))
	switch {
	case tc.Error != "":
		sp.SetAttributes(attribute.String("error.type", "call_failed"))
		sp.SetStatus(codes.Error, e.cut(tc.Error))
	case tc.IsError:
		sp.SetAttributes(attribute.String("error.type", "tool_error"))
		sp.SetStatus(codes.Error, e.cut(tc.Result))
	}
	sp.End(trace.WithTimestamp(start.Add(ms(tc.DurationMs))))
}

// chat is one model call, as far as the transcript tells it.
type chat struct {
	start, end time.Time
	// known: the call is one the transcript shows (an assistant message),
	// not the failed call inferred from a provider error.
	known  bool
	failed bool
}

// chats infers the model calls of t: one per assistant message, from the
// end of the tool calls before it to the start of its own tool calls (or
// the next tool call, or the trial's end); and a last, failed one when the
// provider ended the trial with an error.
func (e *Exporter) chats(t *transcript.Transcript, start, end time.Time) []chat {
	byID := map[string]transcript.ToolCall{}
	for _, tc := range t.ClientToolCalls {
		byID[tc.ID] = tc
	}
	for _, tc := range t.ToolCalls {
		byID[tc.ID] = tc
	}
	starts := make([]time.Time, 0, len(t.ToolCalls))
	for _, tc := range t.ToolCalls {
		if !tc.Started.IsZero() {
			starts = append(starts, tc.Started)
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	clamp := func(x time.Time) time.Time {
		if x.Before(start) {
			return start
		}
		if x.After(end) {
			return end
		}
		return x
	}
	var out []chat
	cursor := start
	for _, m := range t.Messages {
		if m.Role != "assistant" {
			continue
		}
		c := chat{start: cursor, end: end, known: true}
		var first, last time.Time
		for _, id := range m.ToolCalls {
			tc, ok := byID[id]
			if !ok || tc.Started.IsZero() {
				continue
			}
			if first.IsZero() || tc.Started.Before(first) {
				first = tc.Started
			}
			if f := tc.Started.Add(ms(tc.DurationMs)); f.After(last) {
				last = f
			}
		}
		if !first.IsZero() {
			c.end, cursor = first, last
		} else {
			// No tool call of its own: it lasted until the next tool
			// call began, or the trial ended.
			for _, s := range starts {
				if s.After(cursor) {
					c.end = s
					break
				}
			}
			cursor = c.end
		}
		c.start, c.end = clamp(c.start), clamp(c.end)
		if c.end.Before(c.start) {
			c.end = c.start
		}
		cursor = clamp(cursor)
		out = append(out, c)
	}
	if t.Outcome.Status == transcript.Errored && t.Outcome.Cause == transcript.CauseProvider {
		out = append(out, chat{start: cursor, end: end, failed: true})
	}
	return out
}

// str is a string attribute with its value redacted.
func (e *Exporter) str(key, value string) attribute.KeyValue {
	return attribute.String(key, e.clean(value))
}

// text is a string attribute of free text: redacted, then cut to
// maxContent (in that order, so a cut never leaves part of a secret).
func (e *Exporter) text(key, value string) attribute.KeyValue {
	return attribute.String(key, e.cut(value))
}

// cut is s cleaned, then shortened to maxContent bytes.
func (e *Exporter) cut(s string) string { return cut(e.clean(s)) }

// clean is s redacted and made valid UTF-8 (OTLP's protobuf refuses other
// strings, and one of them would lose the whole batch of spans). A secret's
// form with its bad bytes replaced is known to the redactor, so it is
// redacted again after the replacement.
func (e *Exporter) clean(s string) string {
	s = e.redact.String(s)
	if !utf8.ValidString(s) {
		s = e.redact.String(strings.ToValidUTF8(s, "\uFFFD"))
	}
	return s
}

// providerModel splits a model reference ("anthropic/claude-…") into the
// gen_ai.provider.name and the model as the provider knows it. A bare
// model name (as CLI clients take them) gets the provider of its client.
func providerModel(clientName, ref string) (provider, model string) {
	p, m, ok := strings.Cut(ref, "/")
	if !ok {
		p, m = "", ref
		switch clientName {
		case "claude-code", "cowork":
			p = "anthropic"
		case "codex-cli", "codex-app", "chatgpt":
			p = "openai"
		case "gemini-cli":
			p = "gcp.gemini"
		}
		if ref == "offline" {
			p, m = "offline", ref
		}
	}
	switch p {
	case "google", "gemini":
		p = "gcp.gemini"
	}
	return p, m
}

// cut shortens s to maxContent bytes, at a rune boundary.
func cut(s string) string {
	if len(s) <= maxContent {
		return s
	}
	i := maxContent
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
