package wire

import (
	"net/http"
	"time"
)

// maxIdlePerHost is how many idle connections to one provider endpoint the
// shared client keeps. Go's default is 2: at a concurrency of 20, most
// requests then dialled a connection of their own (and, on https, made a
// TLS handshake), measured at 130 connections for 200 requests. With a
// pool this large, connections are reused up to the run's concurrency,
// whatever it is.
const maxIdlePerHost = 1024

// httpClient is the one HTTP client the providers' SDKs send through, so
// every trial and judge of a run shares one pool per endpoint.
var httpClient = &http.Client{Transport: pooledTransport()}

func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit across hosts
	t.MaxIdleConnsPerHost = maxIdlePerHost
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// HTTPClient is the HTTP client providers send their requests with: the
// proxy settings of http.DefaultTransport, and an idle pool per endpoint
// as large as the run's concurrency.
func HTTPClient() *http.Client { return httpClient }
