package blobtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/mst-eval/mst/internal/builtin/store/blobstore/blobtest"
)

// TestFaultProxy plays each fault against the S3 emulator's endpoint with
// a plain HTTP client: what the client meets, and that the proxy serves
// again on the same address once set back to Pass.
func TestFaultProxy(t *testing.T) {
	t.Parallel()
	s := blobtest.StartS3(t)
	bucket := s.NewBucket(t)
	p, endpoint := blobtest.StartFaultProxy(t, s.URL())
	p.TrickleEvery = 20 * time.Millisecond
	get := func(timeout time.Duration) (*http.Response, []byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/"+bucket+"?list-type=2", nil)
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	pass := func() {
		t.Helper()
		if resp, _, err := get(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("through the proxy in Pass: %v, %v", resp, err)
		}
	}
	pass()

	p.Set(blobtest.Refuse, nil)
	if _, _, err := get(5 * time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("under Refuse: %v, want the connection refused", err)
	}
	p.Set(blobtest.Pass, nil)
	pass()

	met := p.Set(blobtest.Hang, nil)
	done := make(chan error, 1)
	go func() { _, _, err := get(time.Minute); done <- err }()
	<-met
	p.Set(blobtest.Pass, nil) // ends the hung request: its connection closes
	if err := <-done; err == nil {
		t.Errorf("a request hung until the fault changed succeeded")
	}
	pass()

	p.Set(blobtest.Status(503), nil)
	if resp, _, err := get(5 * time.Second); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("under Status(503): %v, %v", resp, err)
	}

	p.Set(blobtest.Cut, nil)
	if _, _, err := get(5 * time.Second); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("under Cut: %v, want the body cut short", err)
	}

	p.Set(blobtest.Trickle, nil)
	if _, _, err := get(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("under Trickle: %v, want no whole answer within 300ms", err)
	}
	p.Set(blobtest.Pass, nil)
	pass()
	if p.Met() < 4 {
		t.Errorf("Met() = %d, want the requests that met a fault counted", p.Met())
	}
}
