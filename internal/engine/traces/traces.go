// Package traces exports the trials of a run as OpenTelemetry traces over
// OTLP, when the standard OTEL_EXPORTER_OTLP_* variables name a collector.
//
// Each trial becomes one trace: a root span for the trial (the client
// invoked on the case's prompt, gen_ai.operation.name "invoke_agent") whose
// children are one span per model call ("chat") and one per tool call
// ("execute_tool"), with the attributes of the OpenTelemetry GenAI semantic
// conventions and MST's own under "mst.". The spans are built from the
// transcript when it reaches the coordinator, not while the trial runs, so
// their times come from the transcript: a trial's and a tool call's are
// exact, a model call's are inferred from the gaps between tool calls (see
// docs/design/013-traces.md).
//
// Every string put in a span passes through the run's redactor first. With
// no endpoint set, Start returns a nil *Exporter, whose methods do nothing:
// no exporter, no goroutine, no allocation.
package traces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mst-eval/mst/secrets"
)

// FlushTimeout bounds how long Shutdown waits for the last spans to reach
// the collector; what is not sent by then is dropped with a warning.
const FlushTimeout = 5 * time.Second

// Protocols a collector may be reached by (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is how Start sets up the exporter. The endpoint, headers, timeout,
// compression and certificates are the OTLP exporter's own: it reads them
// from the standard variables itself.
type Config struct {
	// Redact removes secret values from every string put in a span.
	Redact *secrets.Redactor
	// Logger gets the one warning of an exporter that cannot reach its
	// collector, and of a variable Start does not understand.
	Logger *slog.Logger
	// Version is MST's version, the service.version of the spans.
	Version string
	// Getenv reads the environment; nil means os.Getenv. The OTLP exporter
	// reads its own settings from the process environment whatever this is.
	Getenv func(string) string
	// FlushTimeout overrides FlushTimeout when positive.
	FlushTimeout time.Duration
}

// Exporter turns transcripts into spans and sends them. A nil *Exporter
// exports nothing. Its methods may be called from any goroutine.
type Exporter struct {
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	redact   *secrets.Redactor
	logger   *slog.Logger
	flush    time.Duration
	warnOnce sync.Once
	failed   atomic.Int64 // spans the collector did not take
	sent     atomic.Int64 // spans it took
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint for traces is set, OTEL_SDK_DISABLED is not true and
// OTEL_TRACES_EXPORTER is not "none".
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Start returns an exporter for the collector the environment names, or
// nil when it names none (see Enabled). A setting it cannot use is warned
// about and never stops the run: Start then returns nil too.
func Start(ctx context.Context, c Config) *Exporter {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Enabled(getenv) {
		return nil
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	flush := FlushTimeout
	if c.FlushTimeout > 0 {
		flush = c.FlushTimeout
	}
	exp, err := newExporter(ctx, getenv, flush)
	if err != nil {
		logger.Warn("traces are off: the OTLP exporter could not be set up", "err", c.Redact.String(err.Error()))
		return nil
	}
	e := &Exporter{redact: c.Redact, logger: logger, flush: flush}
	// The service name is "mst" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (later detectors win).
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "mst"), attribute.String("service.version", c.Version)),
		resource.WithFromEnv(),
	)
	if err != nil {
		logger.Warn("OTEL_RESOURCE_ATTRIBUTES could not all be read; the rest are used", "err", c.Redact.String(err.Error()))
	}
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&counting{SpanExporter: exp, e: e}),
		sdktrace.WithResource(res),
	)
	e.tracer = e.tp.Tracer("github.com/mst-eval/mst/internal/engine/traces", trace.WithInstrumentationVersion(c.Version))
	return e
}

// newExporter makes the OTLP exporter of the protocol the environment
// chooses. Its retries stop at the flush bound, so an unreachable
// collector costs at most that at the end of a run.
func newExporter(ctx context.Context, getenv func(string) string, flush time.Duration) (sdktrace.SpanExporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(proto) {
	case "", ProtocolHTTP:
		return otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: flush,
		}))
	case ProtocolGRPC:
		return otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{
			Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: flush,
		}))
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL is %q; MST speaks %q (the default) and %q: set one of them", proto, ProtocolHTTP, ProtocolGRPC)
	}
}

// Shutdown sends the spans not yet sent and stops the exporter, waiting at
// most the flush bound. It never fails: a collector that did not take every
// span is warned about, once.
func (e *Exporter) Shutdown() {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.flush)
	defer cancel()
	err := e.tp.Shutdown(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		e.warn(fmt.Errorf("the collector took longer than %s", e.flush))
	} else if err != nil {
		e.warn(err)
	}
}

// warn says, the first time only, that spans are being lost.
func (e *Exporter) warn(err error) {
	e.warnOnce.Do(func() {
		e.logger.Warn("traces: the OTLP collector did not take the spans sent to it; the run goes on without them",
			"err", e.redact.String(err.Error()))
	})
}

// counting is the OTLP exporter, counting what it sends and warning once
// when the collector refuses or cannot be reached.
type counting struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (c *counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.e.failed.Add(int64(len(spans)))
		c.e.warn(err)
		return nil // warned here; the SDK's global handler would print it again
	}
	c.e.sent.Add(int64(len(spans)))
	return nil
}
