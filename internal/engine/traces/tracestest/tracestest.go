// Package tracestest is a real OTLP trace receiver for tests: it listens on
// loopback for OTLP/HTTP (protobuf) and OTLP/gRPC, decodes every request
// with the official OTLP protobuf types, and keeps the spans and the bytes
// it received.
package tracestest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID empty for a root
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Start, End                time.Time
	Attrs                     map[string]any // string, int64, float64 or bool
	StatusCode                tracepb.Status_StatusCode
	StatusMessage             string
	Resource                  map[string]any
	Scope                     string
}

// Receiver is a running receiver.
type Receiver struct {
	// HTTP is the base URL of the OTLP/HTTP endpoint (the value for
	// OTEL_EXPORTER_OTLP_ENDPOINT); spans are posted to HTTP+"/v1/traces".
	HTTP string
	// GRPC is the OTLP/gRPC endpoint, "http://127.0.0.1:PORT".
	GRPC string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every request
	spans   []Span
	raw     [][]byte
	headers []http.Header
}

// Start starts a receiver that stops when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	r.HTTP = "http://" + hl.Addr().String()

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, grpcService{r: r})
	go gs.Serve(gl)
	t.Cleanup(gs.Stop)
	r.GRPC = "http://" + gl.Addr().String()
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var m collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m, b, req.Header.Clone())
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(ctx context.Context, m *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	g.r.add(m, b, nil)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(m *collectortrace.ExportTraceServiceRequest, raw []byte, h http.Header) {
	var got []Span
	for _, rs := range m.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{
					TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					Name: s.Name, Kind: s.Kind,
					Start: time.Unix(0, int64(s.StartTimeUnixNano)).UTC(), End: time.Unix(0, int64(s.EndTimeUnixNano)).UTC(),
					Attrs: attrs(s.Attributes), Resource: res, Scope: ss.GetScope().GetName(),
					StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
				}
				if len(s.ParentSpanId) > 0 {
					sp.ParentID = hex.EncodeToString(s.ParentSpanId)
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.raw = append(r.raw, bytes.Clone(raw))
	if h != nil {
		r.headers = append(r.headers, h)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		default:
			m[kv.Key] = kv.GetValue().String()
		}
	}
	return m
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns the body of every request received (for gRPC, the request
// encoded again).
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// Headers returns the headers of every OTLP/HTTP request received.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// WaitSpans waits until at least n spans have arrived, or ctx ends; it
// returns the spans received.
func (r *Receiver) WaitSpans(ctx context.Context, n int) []Span {
	for {
		r.mu.Lock()
		have, ch := len(r.spans), r.changed
		r.mu.Unlock()
		if have >= n {
			return r.Spans()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r.Spans()
		}
	}
}
