// Package wire holds what the provider implementations share: the defaults
// of provider.Options and provider.Request, the shape checks of tool schemas
// and call arguments, and the retry of failures that arrive inside an
// otherwise successful HTTP response (an error event in a stream), which the
// SDKs' own HTTP retry cannot see.
//
// Nothing here talks to the network; every function is pure except Retry,
// which waits between attempts.
package wire
