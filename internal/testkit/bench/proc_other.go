//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// measure needs Linux: it reads the accounting of exited processes from
// /proc before reaping them.
func measure(cmd *exec.Cmd, follow func(argv []string) bool) (usage, error) {
	return usage{}, errors.New("the bench measures processes through Linux's /proc and waitid: run it on Linux")
}

// loadAverage is unknown outside Linux.
func loadAverage() string { return "?" }
