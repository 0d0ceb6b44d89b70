//go:build !darwin

package computeruse

import (
	"context"
	"fmt"
	"runtime"
)

// NewMacScreen fails on every OS but macOS; see the macOS build's
// documentation.
func NewMacScreen(context.Context, MacOptions) (Screen, error) {
	return nil, fmt.Errorf("computer use: the macOS screen runs only on macOS, not %s", runtime.GOOS)
}
