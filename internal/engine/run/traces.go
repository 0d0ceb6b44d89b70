package run

import (
	"context"

	"github.com/mst-eval/mst/internal/engine/traces"
)

// startTraces starts the OpenTelemetry exporter when the environment names
// an OTLP collector (internal/engine/traces): each trial's transcript is then
// exported as spans when it reaches the coordinator, redacted like
// everything the run stores. It returns nil, which exports nothing, when
// no collector is named.
func startTraces(ctx context.Context, o Options) *traces.Exporter {
	return traces.Start(ctx, traces.Config{Redact: o.Redact, Logger: o.Logger, Version: o.MSTVersion})
}
